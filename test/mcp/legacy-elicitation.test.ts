import { UrlElicitationRequiredError, type Client, type StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import t, { type Test } from "tap";
import { startHostServer } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { rowCount } from "../helpers/database.js";
import { eventually } from "../helpers/eventually.js";
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

t.test("its notification stream hears notifications/elicitation/complete when the owner decides, and only its own", async (t) => {
  // A token of its own: a stream also hears of its credential's earlier calls decided and not retried yet.
  const client = await connectV2(t, url, await mintToken(owner, { name: "listening agent", scopes: ["host:call"] }), "2025-11-25", URL_ELICITATION);
  const completed: string[] = [];
  client.setNotificationHandler("notifications/elicitation/complete", (notification) => {
    completed.push((notification.params as { elicitationId: string }).elicitationId);
  });
  // Another credential of the same owner, its stream open too, waiting on a call of its own.
  const other = await connectV2(t, url, await mintToken(owner, { name: "third agent", scopes: ["host:call"] }), "2025-11-25", URL_ELICITATION);
  const heardByOther: string[] = [];
  other.setNotificationHandler("notifications/elicitation/complete", (notification) => {
    heardByOther.push((notification.params as { elicitationId: string }).elicitationId);
  });
  // Each client opens its notification stream (GET /mcp) after initializing: the device's stream and these two.
  await eventually(
    () => app.app.tetherStreams.held >= 3,
    10_000,
    () => `the notification streams (${app.app.tetherStreams.held} held)`,
  );

  const args = { device: deviceId, path: "f.txt", content: "u" };
  const asked = await elicitationOf(t, client, args);
  const theirs = await elicitationOf(t, other, { device: deviceId, path: "g.txt", content: "u" });
  t.same(completed, [], "nothing while the owner has not decided");
  t.match(await readJson(await owner.post("/api/host/approve", { proposalId: asked!.elicitationId })), { status: "applied" });
  await eventually(() => completed.length > 0, 10_000, "notifications/elicitation/complete");
  t.same(completed, [asked!.elicitationId], "the decided proposal's elicitation id, once");
  t.match((await client.callTool({ name: "write_file", arguments: args })).structuredContent, { status: "applied" }, "the retry has the outcome");
  t.same(heardByOther, [], "another credential's stream hears nothing of it");
  await owner.post("/api/host/reject", { proposalId: theirs!.elicitationId });
  await eventually(() => heardByOther.length > 0, 10_000, "the other credential's own notification");
  t.same(heardByOther, [theirs!.elicitationId]);
  t.same(completed, [asked!.elicitationId], "and this one hears nothing of the other's");
});

t.test("a retry after the proposal expired undecided proposes anew: the owner gets a fresh one", async (t) => {
  const client = await connectV2(t, url, token, "2025-11-25", URL_ELICITATION);
  const args = { device: deviceId, path: "h.txt", content: "t" };
  const first = await elicitationOf(t, client, args);
  // As if its hour had passed: the proposal and the call waiting on it are past their time.
  const past = new Date(Date.now() - 1000);
  await app.database.db.updateTable("host_proposal").set({ expires_at: past }).where("id", "=", first!.elicitationId).execute();
  await app.database.db.updateTable("mcp_url_elicitation").set({ expires_at: past }).where("proposal_id", "=", first!.elicitationId).execute();
  const again = await elicitationOf(t, client, args);
  t.not(again?.elicitationId, first!.elicitationId, "a new proposal, not the expired one");
  await owner.post("/api/host/reject", { proposalId: again!.elicitationId });
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
