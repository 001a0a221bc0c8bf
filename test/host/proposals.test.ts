import t from "tap";
import { connectedDevice, signedIn, startHostServer } from "./helpers.js";
import { readJson } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";

const DIFF = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-old\n+new\n";

t.test("proposals", async (t) => {
  const server = await startHostServer(t);
  const db = server.database.db;

  /** A device whose write_file plans a fixed diff and applies by recording the input it was given. */
  const connected = async () => {
    const { owner, deviceId, device } = await connectedDevice(t, server.url);
    const applied: unknown[] = [];
    device.serve(async (call) => {
      if (call.mode === "plan") return { diff: DIFF, summary: `write ${call.input.path}` };
      if (call.mode === "apply") {
        await new Promise((resolve) => setTimeout(resolve, 30));
        if (call.input.path === "changed.txt") return { error: { code: "FILE_CHANGED", message: "changed.txt changed since the proposal" } };
        applied.push(call.input);
        return { written: call.input.path };
      }
      return { mode: call.mode };
    });
    const propose = async (input: Record<string, unknown> = { path: "notes.txt", content: "new\n" }) => {
      const response = await owner.post("/api/host/calls", { deviceId, tool: "write_file", input });
      t.equal(response.status, 202);
      return readJson(response);
    };
    return { owner, device, deviceId, applied, propose };
  };

  t.test("a mutate call proposes (202 with the diff); approve applies the stored input once", async (t) => {
    const { owner, applied, propose } = await connected();
    const proposal = await propose();
    t.match(proposal, { proposalId: String, tool: "write_file", diff: DIFF, summary: "write notes.txt" });
    t.equal(applied.length, 0, "planning touches nothing");

    // The list carries no diffs or inputs (issue 24); one proposal, read on its own, has both.
    const pending = await readJson(await owner.get("/api/host/proposals"));
    t.match(pending, {
      proposals: [{ id: proposal.proposalId, status: "pending", summary: "write notes.txt", diffBytes: DIFF.length, diffLines: 5 }],
      nextCursor: null,
      total: 1,
    });
    t.notOk("diff" in pending.proposals[0] || "input" in pending.proposals[0], "the list has no diff or input");
    t.match(await readJson(await owner.get(`/api/host/proposals/${proposal.proposalId}`)), {
      diff: DIFF,
      input: { path: "notes.txt", content: "new\n" },
      purgedAt: null,
    });

    const approved = await owner.post("/api/host/approve", { proposalId: proposal.proposalId });
    t.equal(approved.status, 200);
    t.same(await readJson(approved), { proposalId: proposal.proposalId, status: "applied", result: { written: "notes.txt" } });
    t.same(applied, [{ path: "notes.txt", content: "new\n" }]);
    t.same((await readJson(await owner.get("/api/host/proposals"))).proposals, [], "no longer pending");

    const again = await owner.post("/api/host/approve", { proposalId: proposal.proposalId });
    t.equal(again.status, 409);
    t.same(await readJson(again), { code: "ALREADY_DECIDED", message: "This proposal was already decided (applied)" });

    await server.app.tetherAudit.flush();
    const trail = await db.selectFrom("activity_event").select(["event", "outcome"]).where("proposal_id", "=", proposal.proposalId).orderBy("id").execute();
    t.same(
      trail.map((r) => `${r.event}:${r.outcome}`),
      ["propose:ok", "approve:ok", "apply:ok"],
    );
  });

  t.test("a concurrent double approve applies once; the other click gets 409 ALREADY_DECIDED", async (t) => {
    const { owner, applied, propose } = await connected();
    const { proposalId } = await propose();
    const responses = await Promise.all(Array.from({ length: 5 }, () => owner.post("/api/host/approve", { proposalId })));
    const statuses = responses.map((r) => r.status).sort();
    t.same(statuses, [200, 409, 409, 409, 409]);
    for (const response of responses) {
      if (response.status === 409) t.equal((await readJson(response)).code, "ALREADY_DECIDED");
    }
    t.equal(applied.length, 1, "applied exactly once");
  });

  t.test("the input cannot be altered at approve", async (t) => {
    const { owner, applied, propose } = await connected();
    const { proposalId } = await propose({ path: "notes.txt", content: "safe\n" });
    const altered = await owner.post("/api/host/approve", { proposalId, input: { path: "notes.txt", content: "evil\n" } });
    t.equal(altered.status, 400);
    t.match(await readJson(altered), { code: "INVALID_INPUT", message: /input/ });
    t.equal(applied.length, 0);
    t.equal((await owner.post("/api/host/approve", { proposalId })).status, 200);
    t.same(applied, [{ path: "notes.txt", content: "safe\n" }], "the stored input is what was applied");
  });

  t.test("reject; then neither approve nor reject again", async (t) => {
    const { owner, applied, propose } = await connected();
    const { proposalId } = await propose();
    const rejected = await owner.post("/api/host/reject", { proposalId });
    t.equal(rejected.status, 200);
    t.same(await readJson(rejected), { proposalId, status: "rejected" });
    const approve = await owner.post("/api/host/approve", { proposalId });
    t.equal(approve.status, 409);
    t.same(await readJson(approve), { code: "ALREADY_DECIDED", message: "This proposal was already decided (rejected)" });
    t.equal((await owner.post("/api/host/reject", { proposalId })).status, 409);
    t.equal(applied.length, 0);
  });

  t.test("an expired proposal cannot be approved", async (t) => {
    const { owner, applied, propose } = await connected();
    const { proposalId } = await propose();
    await db
      .updateTable("host_proposal")
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where("id", "=", proposalId)
      .execute();
    const response = await owner.post("/api/host/approve", { proposalId });
    t.equal(response.status, 409);
    t.same(await readJson(response), { code: "PROPOSAL_EXPIRED", message: "This proposal expired; run the tool again for a fresh diff" });
    const row = await db.selectFrom("host_proposal").select("status").where("id", "=", proposalId).executeTakeFirstOrThrow();
    t.equal(row.status, "expired");
    t.equal(applied.length, 0);
  });

  t.test("apply refused by the device (file changed): 422 with its code, proposal failed", async (t) => {
    const { owner, propose } = await connected();
    const { proposalId } = await propose({ path: "changed.txt", content: "x" });
    const response = await owner.post("/api/host/approve", { proposalId });
    t.equal(response.status, 422);
    t.same(await readJson(response), { code: "FILE_CHANGED", message: "changed.txt changed since the proposal" });
    const row = await db.selectFrom("host_proposal").selectAll().where("id", "=", proposalId).executeTakeFirstOrThrow();
    t.match(row, { status: "failed", error_code: "FILE_CHANGED" });
  });

  t.test("approve while the device is offline: 409, and the proposal stays pending", async (t) => {
    const { owner, device, deviceId, propose } = await connected();
    const { proposalId } = await propose();
    device.disconnect();
    await eventually(
      async () => {
        const { devices } = (await readJson(await owner.get("/api/host/devices"))) as { devices: Array<{ id: string; online: boolean }> };
        return devices.some((listed) => listed.id === deviceId && !listed.online);
      },
      10_000,
      "the owner to see the device offline",
    );
    const response = await owner.post("/api/host/approve", { proposalId });
    t.equal(response.status, 409);
    t.equal((await readJson(response)).code, "DEVICE_OFFLINE");
    const row = await db.selectFrom("host_proposal").select("status").where("id", "=", proposalId).executeTakeFirstOrThrow();
    t.equal(row.status, "pending");
  });

  t.test("only the owner's browser session decides: not a token, not another user", async (t) => {
    const { owner, applied, propose } = await connected();
    const { proposalId } = await propose();
    const { token } = await readJson(await owner.post("/api/tokens", { name: "agent", scopes: ["host:call"] }));
    const byToken = await fetch(`${server.url}/api/host/approve`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ proposalId }),
    });
    t.equal(byToken.status, 403);
    t.equal((await readJson(byToken)).code, "COOKIE_SESSION_REQUIRED");
    const stranger = await signedIn(server.url);
    const foreign = await stranger.post("/api/host/approve", { proposalId });
    t.equal(foreign.status, 404);
    t.equal((await readJson(foreign)).code, "PROPOSAL_NOT_FOUND");
    t.equal((await stranger.post("/api/host/reject", { proposalId })).status, 404);
    t.equal(applied.length, 0);
  });

  t.test("a plan that is not a proposal is refused, and nothing is stored", async (t) => {
    const { owner, deviceId, device } = await connectedDevice(t, server.url);
    device.serve(() => ({ nothing: true }));
    const response = await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "x", content: "" } });
    t.equal(response.status, 502);
    t.equal((await readJson(response)).code, "NOT_A_PROPOSAL");
    t.equal((await db.selectFrom("host_proposal").select("id").where("device_id", "=", deviceId).execute()).length, 0);
  });
});
