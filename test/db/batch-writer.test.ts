import t from "tap";
import type { Test } from "tap";
import { createBatchWriter } from "../../src/db/batch-writer.js";
import { ACTIVITY_EVENT_COLUMNS } from "../../src/db/schema.js";
import { eventually } from "../helpers/eventually.js";
import { openTestDatabase, rowCount } from "../helpers/database.js";

const row = (userId: string, n: number) => ({ user_id: userId, event: "call", actor: "token", tool: `t${n}`, outcome: "ok" });

/** A database of the test's own with one user (audit rows reference a user), closed when the test ends. */
async function databaseWithUser(t: Test, userId: string) {
  const database = await openTestDatabase();
  t.teardown(() => database.close());
  const now = new Date();
  await database.db
    .insertInto("user")
    .values({ id: userId, name: "U", email: `${userId}@example.com`, emailVerified: false, createdAt: now, updatedAt: now })
    .execute();
  return database.db;
}

for (const [form, columns] of [
  ["VALUES", undefined],
  ["unnest", ACTIVITY_EVENT_COLUMNS],
] as const)
  t.test(`audit rows in batches (${form}): visible soon without a flush, none lost on a clean stop, a bad row blocks nothing`, async (t) => {
    const userId = "batch-writer-user";
    const db = await databaseWithUser(t, userId);
    const count = () => rowCount(db, "activity_event");

    const errors: unknown[] = [];
    const writer = createBatchWriter(db, "activity_event", {
      ...(columns ? { columns } : {}),
      maxBatch: 100,
      flushIntervalMs: 20,
      onError: (error) => errors.push(error),
    });
    writer.write(row(userId, 0));
    await eventually(async () => (await count()) === 1, 10_000, "the row written by the timer");

    // A row whose user does not exist fails its batch; the others in it are still written.
    writer.write(row("no-such-user", 1));
    for (let n = 2; n < 50; n++) writer.write(row(userId, n));
    await writer.flush();
    t.equal(await count(), 49, "every good row, the bad one dropped");
    t.equal(errors.length, 1, "the dropped row is reported");

    // A burst far over a batch, then a clean stop straight away: every row is in.
    for (let n = 0; n < 1_234; n++) writer.write(row(userId, n));
    t.ok(writer.queued > 0, "the burst is queued, not awaited");
    await writer.close();
    t.equal(writer.queued, 0);
    t.equal(await count(), 49 + 1_234, "a clean stop loses no row");

    writer.write(row(userId, -1));
    t.equal(errors.length, 2, "a write after close is reported, not silently lost");
  });

t.test("the one-array-per-column INSERT stores every value as written: text that array literals must escape, nulls, numbers, JSON", async (t) => {
  const db = await databaseWithUser(t, "unnest-user");
  const writer = createBatchWriter(db, "activity_event", { columns: ACTIVITY_EVENT_COLUMNS, onError: (error) => t.fail(String(error)) });
  const awkward = ["a,b", "{braces}", 'say "hi"', "back\\slash", "NULL", "", "  spaced  ", "naïve ✓ 日本"];
  awkward.forEach((text, n) =>
    writer.write({
      user_id: "unnest-user",
      event: "call",
      actor: "token",
      tool: text,
      mode: null,
      outcome: "ok",
      duration_ms: n,
      detail: JSON.stringify({ text, n, nested: { list: [1, null, "x"] } }),
    }),
  );
  // A row naming a column the writer does not list (`at`) is written with the VALUES form instead.
  writer.write({ user_id: "unnest-user", event: "call", actor: "token", tool: "dated", outcome: "ok", at: new Date("2020-01-02T03:04:05Z") });
  await writer.close();
  const rows = await db
    .selectFrom("activity_event")
    .select(["tool", "mode", "duration_ms", "detail", "at"])
    .where("user_id", "=", "unnest-user")
    .orderBy("id")
    .execute();
  t.same(
    rows.slice(0, awkward.length).map((row) => [row.tool, row.mode, row.duration_ms, row.detail]),
    awkward.map((text, n) => [text, null, n, { text, n, nested: { list: [1, null, "x"] } }]),
    "each text, null, number and JSON value comes back unchanged",
  );
  t.equal(rows[awkward.length]?.tool, "dated");
  t.equal(new Date(rows[awkward.length]!.at).toISOString(), "2020-01-02T03:04:05.000Z", "a column outside the list still reaches the table");
});

t.test("rows written while a batch is being written are not stranded: they go out on their own, with no flush and no further write", async (t) => {
  const db = await databaseWithUser(t, "trickle-user");
  const count = async () =>
    Number((await db.selectFrom("activity_event").select(db.fn.countAll().as("n")).where("user_id", "=", "trickle-user").executeTakeFirstOrThrow()).n);
  const writer = createBatchWriter(db, "activity_event", {
    columns: ACTIVITY_EVENT_COLUMNS,
    maxBatch: 10_000,
    flushIntervalMs: 30,
    onError: (error) => t.fail(String(error)),
  });
  t.teardown(() => writer.close());

  for (let n = 0; n < 300; n++) writer.write(row("trickle-user", n));
  // The timer starts the batch; while its INSERT runs (the database answers asynchronously), more rows arrive.
  await eventually(async () => writer.queued === 0, 10_000, "the first batch taken off the queue");
  for (let n = 300; n < 310; n++) writer.write(row("trickle-user", n));
  t.equal(writer.queued, 10, "the late rows wait in the queue");
  // No flush, no further write: the late rows still arrive (their own interval).
  await eventually(async () => (await count()) === 310, 10_000, "every row, the late ones included");
  t.equal(writer.queued, 0);
});
