/**
 * What a device may put in a plan, and how many proposals may wait (issue 24): a plan's every bounded
 * field is checked before anything is stored (502 PLAN_INVALID), and a user and each device have a
 * limit of pending proposals (429 TOO_MANY_PENDING, naming how many wait), held under concurrency.
 */
import t, { type Test } from "tap";
import { MAX_PLAN_ENTRIES, MAX_PLAN_PATH_LENGTH, MAX_PLAN_SUMMARY_LENGTH } from "../../src/protocol/index.js";
import { readJson } from "../helpers/client.js";
import { connectedDevice, pair, ScriptedDevice, startHostServer } from "./helpers.js";

const DIFF = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-old\n+new\n";
const PER_DEVICE = 3;
const PER_USER = 5;

const server = await startHostServer(t, { env: { MAX_PENDING_PROPOSALS_PER_DEVICE: String(PER_DEVICE), MAX_PENDING_PROPOSALS_PER_USER: String(PER_USER) } });
const db = server.database.db;

const storedFor = async (deviceId: string) => (await db.selectFrom("host_proposal").select("id").where("device_id", "=", deviceId).execute()).length;

t.test("a plan outside the protocol's bounds is refused (502 PLAN_INVALID), and nothing is stored", async (t) => {
  const { owner, deviceId, device } = await connectedDevice(t, server.url);
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ["a 7 MB summary", { diff: DIFF, summary: "x".repeat(7 * 1024 * 1024) }, /"summary" \(7340032 characters\)/],
    ["a summary one character too long", { diff: DIFF, summary: "x".repeat(MAX_PLAN_SUMMARY_LENGTH + 1) }, /"summary"/],
    ["a path too long", { diff: DIFF, summary: "s", path: "/a".repeat(MAX_PLAN_PATH_LENGTH) }, /"path" \(8192 characters\)/],
    [
      "too many entries",
      { diff: "", summary: "s", removes: Array.from({ length: MAX_PLAN_ENTRIES + 1 }, (_, i) => ({ path: `f${i}`, type: "file" })) },
      /"removes" \(1001 items\)/,
    ],
    [
      "a path too long inside an entry",
      { diff: "", summary: "s", removes: [{ path: "x".repeat(MAX_PLAN_PATH_LENGTH + 1), type: "file" }] },
      /"removes\.0\.path"/,
    ],
    ["a negative count", { diff: "", summary: "s", totals: { files: -1 } }, /"totals\.files"/],
    ["a summary that is not text", { diff: DIFF, summary: 7 }, /"summary"/],
  ];
  let plan: Record<string, unknown> = {};
  device.serve(() => plan);
  for (const [what, planned, named] of cases) {
    plan = planned;
    const response = await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "notes.txt", content: "x" } });
    t.equal(response.status, 502, what);
    const body = await readJson(response);
    t.equal(body.code, "PLAN_INVALID", what);
    t.match(body.message, named, `${what}: the message names the field`);
    t.notMatch(body.message, /xxxxxxxxxx/, `${what}: and does not repeat what the device sent`);
  }
  t.equal(await storedFor(deviceId), 0, "nothing was stored");
  t.equal((await readJson(await owner.get("/api/host/proposals"))).proposals.length, 0);

  // At the bounds it is a proposal.
  plan = {
    diff: DIFF,
    summary: "y".repeat(MAX_PLAN_SUMMARY_LENGTH),
    path: "p".repeat(MAX_PLAN_PATH_LENGTH),
    removes: [],
    totals: { files: 3 },
    extra: { anything: [1, 2] },
  };
  const accepted = await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "notes.txt", content: "x" } });
  t.equal(accepted.status, 202);
  t.equal((await readJson(accepted)).summary.length, MAX_PLAN_SUMMARY_LENGTH);

  await server.app.tetherAudit.flush();
  const refused = await db
    .selectFrom("activity_event")
    .select("error_code")
    .where("device_id", "=", deviceId)
    .where("event", "=", "propose")
    .where("outcome", "=", "error")
    .execute();
  t.equal(refused.length, cases.length, "each refusal is audited");
  t.ok(refused.every((row) => row.error_code === "PLAN_INVALID"));
});

/** A second device of `owner`'s, connected. */
async function anotherDevice(t: Test, owner: Parameters<typeof pair>[0], name: string): Promise<{ deviceId: string; device: ScriptedDevice }> {
  const { deviceId, token } = await pair(owner, name);
  const device = new ScriptedDevice(server.url, deviceId, token);
  t.equal((await device.hello()).status, 200);
  await device.connect();
  t.teardown(() => device.disconnect());
  return { deviceId, device };
}

t.test("pending proposals are limited per device and per user: 429 TOO_MANY_PENDING says how many wait", async (t) => {
  const { owner, deviceId, device } = await connectedDevice(t, server.url, "laptop");
  let plans = 0;
  device.serve((call) => {
    if (call.mode === "plan") plans++;
    return { diff: DIFF, summary: `write ${call.input.path}` };
  });
  const propose = (id: string, path = "notes.txt") => owner.post("/api/host/calls", { deviceId: id, tool: "write_file", input: { path, content: "x" } });

  const first: string[] = [];
  for (let i = 0; i < PER_DEVICE; i++) {
    const response = await propose(deviceId, `f${i}`);
    t.equal(response.status, 202);
    first.push((await readJson(response)).proposalId);
  }
  const refused = await propose(deviceId);
  t.equal(refused.status, 429);
  t.same(await readJson(refused), {
    code: "TOO_MANY_PENDING",
    message: `3 proposals from “laptop” are already waiting for your decision (the limit is 3 per device). Approve or reject some on /devices, or let them expire, then propose again.`,
  });
  t.equal(plans, PER_DEVICE, "the device was not asked to plan a change there is no room for");

  // Another device of the same owner: room for the user's remaining two.
  const second = await anotherDevice(t, owner, "desktop");
  second.device.serve(() => ({ diff: DIFF, summary: "write" }));
  t.equal((await propose(second.deviceId, "a")).status, 202);
  t.equal((await propose(second.deviceId, "b")).status, 202);
  const overUser = await propose(second.deviceId, "c");
  t.equal(overUser.status, 429);
  t.match(await readJson(overUser), { code: "TOO_MANY_PENDING", message: /^5 proposals are already waiting for your decision \(the limit is 5\)/ });

  // A decision makes room; so does expiry.
  t.equal((await owner.post("/api/host/reject", { proposalId: first[0] })).status, 200);
  t.equal((await propose(deviceId, "again")).status, 202);
  await db
    .updateTable("host_proposal")
    .set({ expires_at: new Date(Date.now() - 1000) })
    .where("id", "=", first[1]!)
    .execute();
  t.equal((await propose(deviceId, "after-expiry")).status, 202, "an expired proposal no longer counts");
  t.equal((await propose(deviceId, "full")).status, 429);

  await server.app.tetherAudit.flush();
  const audited = await db
    .selectFrom("activity_event")
    .select("error_code")
    .where("user_id", "=", owner.userId)
    .where("error_code", "=", "TOO_MANY_PENDING")
    .execute();
  t.equal(audited.length, 3, "each refusal is audited");
});

t.test("concurrent proposals never go past the limit", async (t) => {
  const { owner, deviceId, device } = await connectedDevice(t, server.url, "racer");
  // Every call passes the early check (nothing is pending yet); the device answers only once all ten
  // are planning, and answers them in one batch, so the ten stores start together and race.
  const ATTEMPTS = 10;
  const calls: { id: string }[] = [];
  const answered = (async () => {
    while (calls.length < ATTEMPTS) calls.push(await device.next("call", 30_000));
    const results = calls.map((call) => ({ id: call.id, ok: true, result: { diff: DIFF, summary: "race" } }));
    const batch = await fetch(`${server.url}/api/host/results`, {
      method: "POST",
      headers: device.headers({ "content-type": "application/json" }),
      body: JSON.stringify({ results }),
    });
    t.same(await readJson(batch), { refused: [] }, "the device's answers were all taken");
  })();
  const responses = await Promise.all(
    Array.from({ length: ATTEMPTS }, (_, i) =>
      owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: `r${i}`, content: "x" }, timeoutMs: 60_000 }),
    ),
  );
  await answered;
  const statuses = responses.map((response) => response.status).sort();
  t.same(statuses, [...Array(PER_DEVICE).fill(202), ...Array(ATTEMPTS - PER_DEVICE).fill(429)]);
  t.equal(await storedFor(deviceId), PER_DEVICE, "exactly the limit was stored");
  for (const response of responses) {
    if (response.status === 429) t.match(await readJson(response), { code: "TOO_MANY_PENDING", message: /^3 proposals from “racer”/ });
  }
});
