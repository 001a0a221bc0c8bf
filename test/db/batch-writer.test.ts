import t from "tap";
import { createBatchWriter } from "../../src/db/batch-writer.js";
import { eventually } from "../host/helpers.js";
import { openTestDatabase } from "../helpers/database.js";

const row = (userId: string, n: number) => ({ user_id: userId, event: "call", actor: "token", tool: `t${n}`, outcome: "ok" });

t.test("audit rows in batches: visible soon without a flush, none lost on a clean stop, a bad row blocks nothing", async (t) => {
  const database = await openTestDatabase();
  t.teardown(() => database.close());
  const { db } = database;
  const userId = "batch-writer-user";
  const now = new Date();
  await db.insertInto("user").values({ id: userId, name: "B", email: "b@example.com", emailVerified: false, createdAt: now, updatedAt: now }).execute();
  const count = async () => Number((await db.selectFrom("host_audit").select(db.fn.countAll().as("n")).executeTakeFirstOrThrow()).n);

  const errors: unknown[] = [];
  const writer = createBatchWriter(db, "host_audit", { maxBatch: 100, flushIntervalMs: 20, onError: (error) => errors.push(error) });
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
