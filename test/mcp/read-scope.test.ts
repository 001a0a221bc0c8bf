import t from "tap";
import { connectedDevice, startHostServer } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { connectV2, type Revision } from "./v2.js";

/** A `host:read` credential sees and calls read tools and list_devices only, at either revision. */
const app = await startHostServer(t);
const { url } = app;
const { owner, deviceId, device } = await connectedDevice(t, url, "box");
const calls: string[] = [];
device.serve((call) => {
  calls.push(`${call.tool}:${call.mode}`);
  return call.mode === "plan" ? { diff: "", summary: "Write" } : { size: 1 };
});
const readToken = await mintToken(owner, { name: "reader", scopes: ["host:read"] });

for (const revision of ["2026-07-28", "2025-11-25"] as Revision[]) {
  t.test(`at ${revision}: only read tools and list_devices are listed; the rest are not callable`, async (t) => {
    const client = await connectV2(t, url, readToken, revision);
    t.same(
      (await client.listTools()).tools.map((tool) => tool.name),
      ["list_devices", "stat"],
    );
    t.notOk((await client.callTool({ name: "stat", arguments: { device: deviceId, path: "a" } })).isError);
    calls.length = 0;
    const write = await client.callTool({ name: "write_file", arguments: { device: deviceId, path: "a", content: "x" } });
    t.match(write, { isError: true, structuredContent: { code: "UNKNOWN_TOOL" } });
    t.same(calls, [], "the device never saw the mutate tool's call");
    t.match(await client.callTool({ name: "proposal_status", arguments: { proposalId: "x" } }), { isError: true, structuredContent: { code: "UNKNOWN_TOOL" } });
    t.match(await client.callTool({ name: "open_path", arguments: { device: deviceId, path: "a" } }), { isError: true });
  });
}

t.test("no proposal was made with a read-only credential", async (t) => {
  const pending = await readJson(await owner.get("/api/host/proposals"));
  t.same(pending.proposals, []);
});

t.test("a token with neither host scope is refused with insufficient_scope naming both", async (t) => {
  const other = await mintToken(owner, { name: "admin", scopes: ["admin"] });
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${other}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: "{}",
  });
  t.equal(response.status, 403);
  t.match(await readJson(response), { error: "insufficient_scope", error_description: /host:call.*host:read/ });
});
