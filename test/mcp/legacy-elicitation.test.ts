import { UrlElicitationRequiredError, type Client, type StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import t, { type Test } from "tap";
import { startHostServer } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { rowCount } from "../helpers/database.js";
import { approvalWorld } from "./helpers.js";
import { connectV2, rawLegacyWriteFileCall } from "./v2.js";

/**
 * Approval inside the tool call at 2025-11-25 (the SDK v2 client's `initialize` handshake): a client that
 * declared URL-mode elicitation gets the JSON-RPC error -32042 with the proposal's page, and its retry of
 * the same call gets -32042 again while the proposal waits, then the applied result or the refusal. Any
 * other 2025-11-25 client gets the proposal and its link, as before.
 */
const { app, url, owner, deviceId, device, token } = await approvalWorld(t);
const URL_ELICITATION = { elicitation: { url: {} } };

/** The call's -32042, or a failure naming what came instead. */
async function elicitationOf(t: Test, client: Client, args: Record<string, unknown>) {
  try {
    const result = await client.callTool({ name: "write_file", arguments: args });
    t.fail(`expected -32042, got a result: ${JSON.stringify(result.structuredContent)}`);
    return undefined;
  } catch (error) {
    t.ok(error instanceof UrlElicitationRequiredError, `-32042 (${String(error)})`);
    return (error as UrlElicitationRequiredError).elicitations[0]!;
  }
}

const proposalIdOf = (address: string) => decodeURIComponent(new URL(address).pathname.split("/").pop()!);

t.test("a client that declared URL elicitation: -32042 with the proposal's page; the retry waits, then gets the applied result once", async (t) => {
  const client = await connectV2(t, url, token, "2025-11-25", URL_ELICITATION);
  t.match((client.transport as StreamableHTTPClientTransport).sessionId, /^[\w-]+\.[\w-]+$/, "initialize gave a session id that carries the declaration");
  const args = { device: deviceId, path: "a.txt", content: "x" };
  const first = await elicitationOf(t, client, args);
  t.match(first, { mode: "url", url: new RegExp(`^${url}/devices/proposals/`), message: /approve or reject/ });
  const proposalId = proposalIdOf(first!.url);
  t.equal(first!.elicitationId, proposalId, "the elicitation id is the proposal's");

  const again = await elicitationOf(t, client, { content: "x", path: "a.txt", device: deviceId });
  t.equal(again?.url, first!.url, "a retry while the owner has not decided (its arguments in another order): the same proposal, asked again");

  t.match(await readJson(await owner.post("/api/host/approve", { proposalId })), { status: "applied" });
  const result = await client.callTool({ name: "write_file", arguments: args });
  t.notOk(result.isError);
  t.match(result.structuredContent, { proposalId, status: "applied", result: /"written": "a.txt"/ });

  const next = await elicitationOf(t, client, args);
  t.not(next && proposalIdOf(next.url), proposalId, "the same call made again after its outcome was taken is a new proposal");
  await owner.post("/api/host/reject", { proposalId: proposalIdOf(next!.url) });
});

t.test("rejected: the retry is the refusal; another credential's identical call is its own proposal", async (t) => {
  const client = await connectV2(t, url, token, "2025-11-25", URL_ELICITATION);
  const args = { device: deviceId, path: "b.txt", content: "y" };
  const asked = await elicitationOf(t, client, args);
  const other = await connectV2(t, url, await mintToken(owner, { name: "second agent", scopes: ["host:call"] }), "2025-11-25", URL_ELICITATION);
  const theirs = await elicitationOf(t, other, args);
  t.not(theirs?.url, asked?.url, "not the first credential's proposal");

  t.equal((await owner.post("/api/host/reject", { proposalId: proposalIdOf(asked!.url) })).status, 200);
  const refused = await client.callTool({ name: "write_file", arguments: args });
  t.equal(refused.isError, true);
  t.match(refused.structuredContent, { status: "rejected" });
  await owner.post("/api/host/reject", { proposalId: proposalIdOf(theirs!.url) });
});

t.test("read tools answer as for any client", async (t) => {
  const client = await connectV2(t, url, token, "2025-11-25", URL_ELICITATION);
  device.serve((call) => (call.tool === "stat" ? { type: "file", size: 1 } : { diff: "", summary: "Write" }));
  const result = await client.callTool({ name: "stat", arguments: { device: deviceId, path: "a.txt" } });
  t.notOk(result.isError);
});

t.test("a client that declared nothing, or a forged session id: the proposal and its link, no session id", async (t) => {
  const plain = await connectV2(t, url, token, "2025-11-25");
  t.equal((plain.transport as StreamableHTTPClientTransport).sessionId, undefined, "no session id for a client that declared nothing");
  const result = await plain.callTool({ name: "write_file", arguments: { device: deviceId, path: "c.txt", content: "z" } });
  t.match(result.structuredContent, { status: "pending", proposalId: /./ });

  const forged = await rawLegacyWriteFileCall(url, token, { device: deviceId, path: "d.txt", content: "w" }, "eyJlbGljaXRhdGlvbiI6WyJ1cmwiXX0.forged");
  t.match(forged.result.structuredContent, { status: "pending" }, "a forged session id declares nothing");
});

t.test("another replica (same database, same secret) reads the session id and finds the waiting call", async (t) => {
  const client = await connectV2(t, url, token, "2025-11-25", URL_ELICITATION);
  const args = { device: deviceId, path: "e.txt", content: "v" };
  const asked = await elicitationOf(t, client, args);
  const replica = await startHostServer(t, { database: app.database });
  const body = await rawLegacyWriteFileCall(replica.url, token, args, (client.transport as StreamableHTTPClientTransport).sessionId);
  t.equal(body.error?.code, -32042);
  t.equal(proposalIdOf(body.error!.data.elicitations[0]!.url), proposalIdOf(asked!.url), "the same proposal, from the other replica");
  const waiting = await rowCount(app.database.db, "mcp_url_elicitation");
  await owner.post("/api/host/reject", { proposalId: proposalIdOf(asked!.url) });
  t.match((await client.callTool({ name: "write_file", arguments: args })).structuredContent, { status: "rejected" });
  t.equal(await rowCount(app.database.db, "mcp_url_elicitation"), waiting - 1, "the retry that took the outcome removed its row");
});
