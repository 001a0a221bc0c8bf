/**
 * The host's security events reach the owner's activity log (the one audit table): a device paired and revoked,
 * proposals approved and rejected, and calls made with one of the owner's API tokens, naming that token.
 */
import t from "tap";
import { mintToken } from "../helpers/auth.js";
import { readJson, TestClient } from "../helpers/client.js";
import { connectedDevice, signedIn, startHostServer } from "../host/helpers.js";

const DIFF = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-old\n+new\n";

t.test("device, proposal and token-call events are in the owner's activity", async (t) => {
  const server = await startHostServer(t);
  const { owner, deviceId, device } = await connectedDevice(t, server.url);
  device.serve((call) => {
    if (call.mode === "plan") return { diff: DIFF, summary: `write ${call.input.path}` };
    if (call.mode === "apply") return { written: call.input.path };
    return { size: 3, type: "file" };
  });

  // A call with one of the owner's tokens (scope host:call), then two proposals: one approved, one rejected.
  const token = await mintToken(owner, { name: "agent", scopes: ["host:call", "activity"] });
  const agent = new TestClient(server.url, { headers: { authorization: `Bearer ${token}` } });
  const called = await agent.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "notes.txt" } });
  t.equal(called.status, 200, "the token's call succeeds");
  const first = await readJson(await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "notes.txt", content: "new\n" } }));
  t.equal((await owner.post("/api/host/approve", { proposalId: first.proposalId })).status, 200);
  const second = await readJson(await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "other.txt", content: "x" } }));
  t.equal((await owner.post("/api/host/reject", { proposalId: second.proposalId })).status, 200);
  t.equal((await owner.delete(`/api/host/devices/${deviceId}`)).status, 204, "the device is revoked");

  // One audit writer batches off the request path for host events and better-auth's sign-in events
  // alike: flushing its one queue makes both visible.
  await server.app.tetherAudit.flush();
  const entries: Array<{ event: string; credential: string | null; credentialName: string | null; tool: string | null }> = (
    await readJson(await owner.get("/api/activity?limit=100"))
  ).entries;
  const events = new Set(entries.map((e) => e.event));
  for (const event of ["sign-up", "token.create", "pair", "enroll", "call", "propose", "approve", "reject", "revoke"]) {
    t.ok(events.has(event), `a "${event}" entry`);
  }
  const tokenCall = entries.find((e) => e.event === "call" && e.tool === "stat");
  t.match(tokenCall, { credential: /^token:/, credentialName: "agent" }, "the token's call names the token that made it");
  const page = await (await owner.get("/settings/activity")).text();
  t.match(page, /tool stat · with API token “agent”/, "the activity page names the token");

  // Nobody else sees any of it.
  const stranger = await signedIn(server.url);
  const theirs: Array<{ event: string }> = (await readJson(await stranger.get("/api/activity?limit=100"))).entries;
  t.notOk(
    theirs.some((e) => ["pair", "call", "approve", "reject", "revoke"].includes(e.event)),
    "another user's activity holds none of the owner's device events",
  );
});
