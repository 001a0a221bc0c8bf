/**
 * Retention (issue 24): the sweep expires pending proposals past their time, and clears the diff, input
 * and result of proposals decided or expired longer ago than `PROPOSAL_RETENTION`; the row and its audit
 * trail stay, and the API, the page and MCP's proposal_status still answer for it. The sweep is driven
 * directly here, run twice at once, and run by a second replica starting on the same database.
 */
import t from "tap";
import { eventually } from "../helpers/eventually.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { connectClient, textOf } from "../mcp/helpers.js";
import { connectedDevice, startHostServer } from "./helpers.js";

const DIFF = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-old\n+new\n";
const HOUR = 60 * 60_000;

const server = await startHostServer(t, { env: { PROPOSAL_RETENTION: "1h" } });
const db = server.database.db;
const { owner, deviceId, device } = await connectedDevice(t, server.url);
device.serve((call) => (call.mode === "apply" ? { applied: true, wrote: call.input.path } : { diff: DIFF, summary: `write ${call.input.path}` }));

async function propose(path: string): Promise<string> {
  const response = await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path, content: "new\n" } });
  if (response.status !== 202) throw new Error(`propose: ${response.status} ${await response.text()}`);
  return (await readJson(response)).proposalId;
}
const row = (id: string) => db.selectFrom("host_proposal").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
/** As if the proposal had finished `ms` ago. */
const finishedAgo = (ids: string[], ms: number) =>
  db
    .updateTable("host_proposal")
    .set({ finished_at: new Date(Date.now() - ms) })
    .where("id", "in", ids)
    .execute();

t.test("decided and expired proposals lose their diff, input and result after the retention; the record stays", async (t) => {
  const applied = await propose("applied.txt");
  t.equal((await owner.post("/api/host/approve", { proposalId: applied })).status, 200);
  const rejected = await propose("rejected.txt");
  t.equal((await owner.post("/api/host/reject", { proposalId: rejected })).status, 200);
  const recent = await propose("recent.txt");
  t.equal((await owner.post("/api/host/reject", { proposalId: recent })).status, 200);
  const stale = await propose("stale.txt");
  await db
    .updateTable("host_proposal")
    .set({ expires_at: new Date(Date.now() - 1000) })
    .where("id", "=", stale)
    .execute();
  const waiting = await propose("waiting.txt");
  await finishedAgo([applied, rejected], 2 * HOUR);
  await finishedAgo([recent], HOUR / 2);

  const outcome = await server.app.tetherHost.sweepProposals();
  t.equal(outcome.purged, 2, "the two finished over an hour ago");
  t.same(outcome.expiredFor, [owner.userId], "the stale one expired");

  for (const id of [applied, rejected]) {
    t.match(await row(id), { diff: null, input: null, result: null, purged_at: Date, diff_bytes: DIFF.length, summary: /^write / }, "purged, the record kept");
  }
  t.match(await row(applied), { status: "applied" });
  t.match(await row(rejected), { status: "rejected" });
  t.match(await row(recent), { status: "rejected", diff: DIFF, purged_at: null }, "within the retention: kept");
  t.match(await row(stale), { status: "expired", finished_at: Date, diff: DIFF, purged_at: null }, "expired now, purged after the retention");
  t.match(await row(waiting), { status: "pending", diff: DIFF, input: { path: "waiting.txt" } }, "pending: untouched");

  await server.app.tetherAudit.flush();
  const trail = await db.selectFrom("activity_event").select("event").where("proposal_id", "in", [applied, rejected]).orderBy("id").execute();
  t.same(
    trail.map((entry) => entry.event),
    ["propose", "approve", "apply", "propose", "reject"],
    "the audit trail stays",
  );

  // What the owner sees of a purged proposal.
  const api = await readJson(await owner.get(`/api/host/proposals/${applied}`));
  t.match(api, { id: applied, status: "applied", diff: null, diffBytes: DIFF.length, diffLines: 5, purgedAt: String, summary: "write applied.txt" });
  const download = await owner.get(`/devices/proposals/${applied}/diff`, { accept: "text/html" });
  t.equal(download.status, 410);
  t.match(await download.text(), /deleted after the retention period/);
  const client = await connectClient(t, server.url, await mintToken(owner, { name: "mcp", scopes: ["host:call"] }));
  const status = await client.callTool({ name: "proposal_status", arguments: { proposalId: applied } });
  t.match(status.structuredContent, { proposalId: applied, status: "applied" }, "proposal_status still answers");
  t.notMatch(textOf(status), /wrote/, "without the purged result");

  t.same(await server.app.tetherHost.sweepProposals(), { expiredFor: [], purged: 0 }, "a second sweep finds nothing to do");
});

t.test("two sweeps at once do each row once", async (t) => {
  const ids = [];
  for (let i = 0; i < 6; i++) {
    const id = await propose(`both-${i}.txt`);
    t.equal((await owner.post("/api/host/reject", { proposalId: id })).status, 200);
    ids.push(id);
  }
  await finishedAgo(ids, 2 * HOUR);
  const [first, second] = await Promise.all([server.app.tetherHost.sweepProposals(), server.app.tetherHost.sweepProposals()]);
  t.equal(first.purged + second.purged, ids.length, `every row purged once (${first.purged} + ${second.purged})`);
  const purged = await db.selectFrom("host_proposal").select("purged_at").where("id", "in", ids).execute();
  t.ok(purged.every((entry) => entry.purged_at !== null));
});

t.test("a replica sweeps when it starts", async (t) => {
  const id = await propose("replica.txt");
  t.equal((await owner.post("/api/host/reject", { proposalId: id })).status, 200);
  await finishedAgo([id], 2 * HOUR);
  await startHostServer(t, { database: server.database, env: { PROPOSAL_RETENTION: "1h" } });
  await eventually(async () => (await row(id)).purged_at !== null, 10_000, "the new replica's sweep");
  t.equal((await row(id)).diff, null);
});
