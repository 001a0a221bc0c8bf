import { AjvJsonSchemaValidator } from "@modelcontextprotocol/server/validators/ajv";
import t from "tap";
import { connectedDevice, startHostServer } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { connectClient, textOf } from "./helpers.js";
import { connectV2, postMcp, rawModern, type Revision } from "./v2.js";

/** /mcp serves 2026-07-28 and 2025-11-25 on one endpoint: the official SDK v2 client at each, and the 1.x client. */
const app = await startHostServer(t);
const { url } = app;
const { owner, deviceId, device } = await connectedDevice(t, url, "box");
// A read answers a stat; a mutate tool plans (an empty diff), then applies.
device.serve((call) => {
  if (call.mode === "plan") return { diff: "", summary: `Write ${call.input.path}` };
  if (call.mode === "apply") return { written: call.input.path };
  return { path: call.input.path, type: "file", size: 12 };
});
const token = await mintToken(owner, { name: "mcp", scopes: ["host:call"] });

for (const revision of ["2026-07-28", "2025-11-25"] as Revision[]) {
  t.test(`SDK v2 client at ${revision}: connect, list tools, call a read tool`, async (t) => {
    const client = await connectV2(t, url, token, revision);
    t.equal(client.getProtocolEra(), revision === "2026-07-28" ? "modern" : "legacy");
    t.match(client.getServerVersion(), { name: "tether" });
    const { tools } = await client.listTools();
    t.same(
      tools.map((tool) => tool.name),
      ["list_devices", "proposal_status", "stat", "write_file"],
    );
    const result = await client.callTool({
      name: "stat",
      arguments: { device: deviceId, path: "notes.txt" },
    });
    t.notOk(result.isError);
    t.match(textOf(result), /"size": 12/);
  });
}

t.test("the 1.x SDK client still connects at 2025-11-25 on the same endpoint", async (t) => {
  const client = await connectClient(t, url, token);
  t.equal((await client.listTools()).tools.length, 4);
});

t.test("2026-07-28 on the wire: server/discover, resultType, the standard headers, the revision's error codes", async (t) => {
  const discover = await rawModern(url, token, "server/discover", {});
  t.equal(discover.status, 200);
  const discovered = await readJson(discover);
  t.match(discovered.result, {
    resultType: "complete",
    supportedVersions: ["2026-07-28"],
    capabilities: { tools: {} },
  });
  t.match(discovered.result._meta, {
    "io.modelcontextprotocol/serverInfo": { name: "tether" },
  });

  const listed = await readJson(await rawModern(url, token, "tools/list", {}));
  t.equal(listed.result.resultType, "complete");

  // Mcp-Method must agree with the body: -32020 (header mismatch), 400.
  const mismatch = await rawModern(url, token, "tools/list", {}, { "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call" });
  t.equal(mismatch.status, 400);
  t.equal((await readJson(mismatch)).error.code, -32020);

  // A revision the server does not serve: -32022 naming the ones it does.
  const unsupported = await postMcp(
    url,
    token,
    { "mcp-protocol-version": "2099-01-01", "mcp-method": "tools/list" },
    {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/list",
      params: { _meta: { "io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {} } },
    },
  );
  const refused = await readJson(unsupported);
  t.equal(refused.error.code, -32022);
  t.match(JSON.stringify(refused.error.data), /2026-07-28/);
});

t.test("authorization is the same at 2026-07-28: no credential is 401 with the resource metadata", async (t) => {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": "server/discover",
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "server/discover",
      params: {},
    }),
  });
  t.equal(response.status, 401);
  t.match(response.headers.get("www-authenticate"), /^Bearer resource_metadata="http:\/\/localhost:\d+\/\.well-known\/oauth-protected-resource\/mcp"/);
});

t.test("every tool has an output schema and its structured result matches it; annotations come from class and definition", async (t) => {
  const validator = new AjvJsonSchemaValidator();
  for (const revision of ["2026-07-28", "2025-11-25"] as Revision[]) {
    const client = await connectV2(t, url, token, revision);
    const tools = new Map((await client.listTools()).tools.map((tool) => [tool.name, tool]));
    for (const tool of tools.values()) t.equal(tool.outputSchema?.type, "object", `${tool.name} has an output schema`);
    t.match(tools.get("stat")!.annotations, { readOnlyHint: true, idempotentHint: true, openWorldHint: false });
    t.match(
      tools.get("write_file")!.annotations,
      { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
      "write_file's own definition: idempotent",
    );

    const matches = (name: string, value: unknown) => {
      const check = validator.getValidator(tools.get(name)!.outputSchema as never)(value);
      t.ok(check.valid, `${name}'s structured result matches its schema ${check.valid ? "" : check.errorMessage}`);
    };
    const stat = await client.callTool({ name: "stat", arguments: { device: deviceId, path: "notes.txt" } });
    matches("stat", stat.structuredContent);
    t.match(stat.structuredContent, { deviceId, tool: "stat", truncated: false, result: /^<untrusted-data nonce="[0-9a-f]{32}" source=/ });
    const devices = await client.callTool({ name: "list_devices", arguments: {} });
    matches("list_devices", devices.structuredContent);
    const proposed = await client.callTool({ name: "write_file", arguments: { device: deviceId, path: "a.txt", content: "x" } });
    t.notOk(proposed.isError, textOf(proposed));
    matches("write_file", proposed.structuredContent);
    const { proposalId } = proposed.structuredContent as { proposalId: string };
    matches("proposal_status", (await client.callTool({ name: "proposal_status", arguments: { proposalId } })).structuredContent);
  }
});
