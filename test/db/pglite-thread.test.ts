import { Kysely, PGliteDialect, sql } from "kysely";
import t from "tap";
import type { Test } from "tap";
import { openDatabase } from "../../src/db/connect.js";
import { startPgliteThread } from "../../src/db/pglite-thread.js";
import { listenWithPglite } from "../../src/db/notifications.js";
import { isDatabaseUnavailable } from "../../src/db/unavailable.js";
import { eventually } from "../helpers/eventually.js";
import { migratedSnapshot } from "../helpers/database.js";

/**
 * The embedded PGlite runs in a worker thread (src/db/pglite-thread.ts): what the app sees through Kysely
 * must be PGlite's own behaviour (results, SQLSTATE codes, transactions, LISTEN), and a query, however
 * long, must not hold up the request thread.
 */

/** Always PGlite (this is its thread), from the suite's migrated snapshot: initdb per test would cost seconds. */
const open = async (t: Test) => {
  const handle = await openDatabase({ kind: "pglite-memory", snapshot: await migratedSnapshot() });
  t.teardown(() => handle.close());
  await sql`create table item (id int primary key, name text not null, seen timestamptz, data jsonb, raw bytea)`.execute(handle.db);
  return handle;
};

t.test("rows, types and affected counts come back as PGlite returns them", async (t) => {
  const { db } = await open(t);
  const when = new Date("2026-11-25T06:00:00.000Z");
  const inserted = await db
    .insertInto("item" as never)
    .values({ id: 1, name: "one", seen: when, data: JSON.stringify({ a: [1, 2] }), raw: Buffer.from([0, 1, 255]) })
    .executeTakeFirst();
  t.equal(inserted.numInsertedOrUpdatedRows, 1n, "affected rows");
  const row = await sql<{ id: number; name: string; seen: Date; data: unknown; raw: Uint8Array }>`select * from item`.execute(db);
  t.equal(row.rows.length, 1);
  const [item] = row.rows;
  t.equal(item!.id, 1);
  t.ok(item!.seen instanceof Date, "timestamptz is a Date");
  t.equal(item!.seen.toISOString(), when.toISOString());
  t.same(item!.data, { a: [1, 2] }, "jsonb is parsed");
  t.same([...item!.raw], [0, 1, 255], "bytea is bytes");
  const updated = await sql`update item set name = 'uno' where id = 1`.execute(db);
  t.equal(updated.numAffectedRows, 1n);
});

t.test("errors keep their SQLSTATE code and fields, and are not 'database unavailable'", async (t) => {
  const { db } = await open(t);
  await sql`insert into item (id, name) values (1, 'one')`.execute(db);
  const duplicate = await sql`insert into item (id, name) values (1, 'again')`.execute(db).catch((error: unknown) => error);
  t.ok(duplicate instanceof Error);
  t.match(duplicate, { code: "23505", constraint: "item_pkey", message: /duplicate key/ }, "unique violation, as PGlite reports it");
  t.notOk(isDatabaseUnavailable(duplicate), "a fault in the query is not an outage");
  const bad = await sql`select * from no_such_table`.execute(db).catch((error: unknown) => error);
  t.match(bad, { code: "42P01" });
  t.same((await sql<{ n: number }>`select 1 as n`.execute(db)).rows, [{ n: 1 }], "the connection is usable after errors");
});

t.test("transactions commit, roll back on a thrown error, and are exclusive", async (t) => {
  const { db } = await open(t);
  await db.transaction().execute(async (tx) => {
    await sql`insert into item (id, name) values (1, 'kept')`.execute(tx);
  });
  const failure = await db
    .transaction()
    .execute(async (tx) => {
      await sql`insert into item (id, name) values (2, 'discarded')`.execute(tx);
      throw new Error("changed my mind");
    })
    .catch((error: Error) => error.message);
  t.equal(failure, "changed my mind", "the callback's error is the transaction's");
  t.same((await sql<{ id: number }>`select id from item order by id`.execute(db)).rows, [{ id: 1 }], "committed kept, rolled back gone");

  // A query outside an open transaction waits for it to end (PGlite has one session), so it sees the commit.
  let release!: () => void;
  let inserted!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const insertDone = new Promise<void>((resolve) => (inserted = resolve));
  const transaction = db.transaction().execute(async (tx) => {
    await sql`insert into item (id, name) values (3, 'late')`.execute(tx);
    inserted();
    await held;
  });
  await insertDone;
  // Sent while the transaction is open; the thread answers messages in order, so the commit sent next
  // reaches it after this query, which must still wait for it.
  const outside = sql<{ count: number }>`select count(*)::int as count from item`.execute(db);
  release();
  await transaction;
  t.equal((await outside).rows[0]!.count, 2, "the outside query ran after the commit");
});

t.test("LISTEN delivers NOTIFY payloads, and stops on close", async (t) => {
  const { db, listen } = await open(t);
  const payloads: string[] = [];
  let ready = 0;
  const subscription = await listen("t_thread", {
    onMessage: (payload) => payloads.push(payload),
    onReady: () => ready++,
    onProven: () => {},
    onLost: () => {},
  });
  t.equal(ready, 1);
  await sql`select pg_notify('t_thread', 'hello')`.execute(db);
  await sql`select pg_notify('other', 'not for us')`.execute(db);
  await eventually(() => payloads.length > 0, 2_000, "the payload");
  t.same(payloads, ["hello"]);
  await subscription.close();
  // Notifications arrive in the order they were sent: once a later one on another channel has arrived,
  // 'after' would have too, had the closed subscription still been listening.
  const marks: string[] = [];
  const marker = await listen("t_marker", { onMessage: (payload) => marks.push(payload), onReady: () => {}, onProven: () => {}, onLost: () => {} });
  await sql`select pg_notify('t_thread', 'after')`.execute(db);
  await sql`select pg_notify('t_marker', 'sent after')`.execute(db);
  await eventually(() => marks.length > 0, 2_000, "the marker");
  await marker.close();
  t.same(payloads, ["hello"], "nothing after the subscription closed");
});

t.test("a long query does not hold up the request thread", async (t) => {
  const { db } = await open(t);
  let ticks = 0;
  const ticker = setInterval(() => ticks++, 10);
  t.teardown(() => clearInterval(ticker));
  const started = performance.now();
  await sql`select count(*) from generate_series(1, 3000000) as s(n) where n % 7 = 0`.execute(db);
  const took = performance.now() - started;
  clearInterval(ticker);
  t.ok(took > 100, `the query took a while (${Math.round(took)} ms)`);
  // In-process, the event loop is blocked for the whole query: no tick at all until it ends.
  t.ok(ticks >= (took / 10) * 0.3, `the event loop kept running: ${ticks} ticks of 10 ms in ${Math.round(took)} ms`);
});

t.test("after close, a query fails at once instead of hanging", async (t) => {
  const handle = await openDatabase({ kind: "pglite-memory", snapshot: await migratedSnapshot() });
  await handle.close();
  const error = await sql`select 1`.execute(handle.db).catch((error: unknown) => error);
  t.ok(error instanceof Error, "rejected");
});

t.test("a database that cannot open fails with PGlite's error instead of hanging", async (t) => {
  // The worker itself fails to open it (PGlite's mkdir): the error crosses back, and the thread ends.
  const error = await startPgliteThread({ dataDir: "/dev/null/not-a-directory" }).catch((error: unknown) => error);
  t.ok(error instanceof Error, "rejected");
  t.match(error, { code: "ENOTDIR", message: /not a directory/ });
});

/**
 * A real fault that ends the database's thread and not the process: a result larger than the thread's
 * heap (Node's resourceLimits) ends it with ERR_WORKER_OUT_OF_MEMORY.
 */
const SMALL_HEAP = { maxOldGenerationSizeMb: 128 };
const exhaustTheHeap = (db: Kysely<never>) => sql`select repeat('x', 1000000) from generate_series(1, 600)`.execute(db).catch((error: unknown) => error);

t.test("on disk, a thread that dies is opened again: 503s meanwhile, committed rows kept, LISTEN resumes", async (t) => {
  const pglite = await startPgliteThread({ dataDir: t.testdir(), resourceLimits: SMALL_HEAP });
  const db = new Kysely<never>({ dialect: new PGliteDialect({ pglite }) });
  t.teardown(() => db.destroy());
  const stops: Error[] = [];
  pglite.onStopped((error) => stops.push(error));
  const events: string[] = [];
  await listenWithPglite(pglite)("t_restart", {
    onMessage: (payload) => events.push(`message ${payload}`),
    onReady: () => events.push("ready"),
    onLost: () => events.push("lost"),
    onProven: () => {},
  });
  await sql`create table kept (id int primary key)`.execute(db);
  await db.transaction().execute(async (tx) => {
    await sql`insert into kept values (1), (2)`.execute(tx);
  });

  const death = await exhaustTheHeap(db);
  t.match(death, { code: "57P02", message: /stopped: .*memory/ }, "the query in flight fails as an outage");
  t.ok(isDatabaseUnavailable(death), "which requests answer 503");
  const meanwhile = await sql`select 1`.execute(db).catch((error: unknown) => error);
  t.match(meanwhile, { code: "57P02" }, "a query while it is down fails at once");
  t.equal(stops.length, 1, "onStopped heard it once");
  t.same(events, ["ready", "lost"], "the LISTEN heard that notifications may be missed");

  let rows: unknown[] = [];
  const back = async () => {
    rows = (await sql<{ id: number }>`select id from kept order by id`.execute(db)).rows;
    return true;
  };
  await eventually(() => back().catch(() => false), 20_000, "the database to be back");
  t.same(rows, [{ id: 1 }, { id: 2 }], "back, with the committed rows");
  t.same(events, ["ready", "lost", "ready"], "the LISTEN is live again (before queries are let through)");
  await sql`select pg_notify('t_restart', 'after')`.execute(db);
  await eventually(() => events.includes("message after"), 5_000, "the notification");
  await db.transaction().execute(async (tx) => {
    await sql`insert into kept values (3)`.execute(tx);
  });
  t.equal((await sql<{ n: number }>`select count(*)::int as n from kept`.execute(db)).rows[0]!.n, 3, "transactions work again");

  // Closing while it is down cancels the pending restart: a new thread would keep the process running.
  await exhaustTheHeap(db);
  await pglite.close();
  t.match(await sql`select 1`.execute(db).catch((error: unknown) => error), { message: /closed/ }, "closed means closed");
});

t.test("in memory, a thread that dies stays down: 503s, never a hang, and no empty database", async (t) => {
  const pglite = await startPgliteThread({ snapshot: await migratedSnapshot(), resourceLimits: SMALL_HEAP });
  const db = new Kysely<never>({ dialect: new PGliteDialect({ pglite }) });
  t.teardown(() => db.destroy());
  t.match(await exhaustTheHeap(db), { code: "57P02" });
  // Proving an absence takes a wait: ten times the first restart delay a thread on disk would take.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const later = await sql`select 1`.execute(db).catch((error: unknown) => error);
  t.match(later, { code: "57P02" }, "still down a second later: its data died with the thread");
  t.ok(isDatabaseUnavailable(later));
});
