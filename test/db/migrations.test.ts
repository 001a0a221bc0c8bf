import { sql } from "kysely";
import t, { type Test } from "tap";
import { allMigrations, authMigrations } from "../../migrations/index.js";
import { migrateToLatest } from "../../src/db/migrate.js";
import { createAuditWriter } from "../../src/plugins/activity/audit-plugin.js";
import { createActivityWriter } from "../../src/plugins/activity/writer.js";
import { announcedTools, createDevice, listDevices, recordHello } from "../../src/plugins/host/devices.js";
import type { AnnouncedTool } from "../../src/protocol/index.js";
import { migrateTestDatabase, openTestDatabase } from "../helpers/database.js";

const appliedNames = async (db: Parameters<typeof migrateToLatest>[0]) =>
  (await sql<{ name: string }>`select name from kysely_migration order by timestamp, name`.execute(db)).rows.map((row) => row.name);

t.test("no two migrations share a number", async (t) => {
  const numbers = Object.keys(allMigrations)
    .sort()
    .map((name) => name.split("_")[0]);
  t.same(numbers, [...new Set(numbers)], "unique");
});

t.test("a new database gets today's names", async (t) => {
  const database = await openTestDatabase();
  t.teardown(() => database.close());
  t.same(await appliedNames(database.db), Object.keys(allMigrations).sort());
});

t.test("auth alone records sign-ins in the activity log; the host set added later links the log to devices", async (t) => {
  const database = await openTestDatabase(authMigrations);
  t.teardown(() => database.close());
  const db = database.db;
  await sql`insert into "user" (id, name, email, "emailVerified", "createdAt", "updatedAt") values ('u1', 'Ann', 'ann@example.com', false, now(), now())`.execute(
    db,
  );
  const audit = createAuditWriter(db);
  t.teardown(() => audit.close());
  const activity = createActivityWriter(audit);
  activity.record({ userId: "u1", event: "sign-in", actor: "session", outcome: "ok", ipAddress: "192.0.2.1" });
  await activity.flush();
  t.match((await sql<{ event: string }>`select event, ip_address from activity_event`.execute(db)).rows, [{ event: "sign-in", ip_address: "192.0.2.1" }]);

  const added = await migrateTestDatabase(db, allMigrations);
  t.ok(added.includes("0004_host") && added.includes("0140_activity_event_host_links"), "the host set runs although its numbers sort before applied ones");
  await sql`insert into host_device (id, user_id, name, platform, token_hash) values ('d1', 'u1', 'box', 'linux', 'h1')`.execute(db);
  await sql`insert into activity_event (user_id, device_id, event, actor, outcome) values ('u1', 'd1', 'call', 'token', 'ok')`.execute(db);
  await t.rejects(
    sql`insert into activity_event (user_id, device_id, event, actor, outcome) values ('u1', 'no-such-device', 'call', 'token', 'ok')`.execute(db),
    "an event cannot name a device that does not exist",
  );
  await sql`delete from host_device where id = 'd1'`.execute(db);
  t.same(
    (await sql<{ event: string }>`select event from activity_event order by id`.execute(db)).rows,
    [{ event: "sign-in" }],
    "a deleted device's events go with it",
  );
});

t.test("0071: devices paired before it count as confirmed; devices paired after it are new", async (t) => {
  // The database as it stood before 0071: every migration before it, none after (Kysely runs them in order).
  const before = Object.fromEntries(Object.entries(allMigrations).filter(([name]) => name < "0071"));
  const since = Object.keys(allMigrations)
    .filter((name) => name >= "0071")
    .sort();
  const database = await openTestDatabase(before);
  t.teardown(() => database.close());
  await sql`insert into "user" (id, name, email, "emailVerified", "createdAt", "updatedAt") values ('u1', 'Old', 'old@example.com', false, now(), now())`.execute(
    database.db,
  );
  await sql`insert into host_device (id, user_id, name, platform, token_hash) values ('d1', 'u1', 'old-box', 'linux', 'h1')`.execute(database.db);
  t.same(await migrateTestDatabase(database.db, allMigrations), since);
  t.match(await listDevices(database.db, "u1"), [{ id: "d1", isNew: false }]);
  const { deviceId } = await createDevice(database.db, { userId: "u1", name: "new-box", platform: "linux" });
  t.match(
    (await listDevices(database.db, "u1")).find((device) => device.id === deviceId),
    { isNew: true },
  );
});

/** A database as it stood before migration `number`: every migration before it, none after (Kysely runs them in order). */
async function databaseBefore(t: Test, number: string) {
  const database = await openTestDatabase(Object.fromEntries(Object.entries(allMigrations).filter(([name]) => name < number)));
  t.teardown(() => database.close());
  return {
    database,
    since: Object.keys(allMigrations)
      .filter((name) => name >= number)
      .sort(),
  };
}

t.test("0110: proposals made before it take their proposer and decider from the audit log", async (t) => {
  const { database, since } = await databaseBefore(t, "0110");
  const db = database.db;
  await sql`insert into "user" (id, name, email, "emailVerified", "createdAt", "updatedAt") values ('u1', 'Old', 'old@example.com', false, now(), now())`.execute(
    db,
  );
  await sql`insert into host_device (id, user_id, name, platform, token_hash) values ('d1', 'u1', 'old-box', 'linux', 'h1')`.execute(db);
  for (const [id, status] of [
    ["p-token", "applied"],
    ["p-oauth", "rejected"],
    ["p-session", "pending"],
    ["p-silent", "expired"],
  ]) {
    await sql`insert into host_proposal (id, user_id, device_id, tool, input, diff, summary, status, expires_at)
      values (${id}, 'u1', 'd1', 'edit_file', '{}', '', 'Edit a', ${status}, now() + interval '1 hour')`.execute(db);
  }
  const audit = (proposal: string, event: string, actor: string, outcome: string, credential: string | null) =>
    sql`insert into activity_event (user_id, device_id, proposal_id, event, actor, outcome, credential) values ('u1', 'd1', ${proposal}, ${event}, ${actor}, ${outcome}, ${credential})`.execute(
      db,
    );
  await audit("p-token", "propose", "token", "ok", "token:t1");
  await audit("p-token", "approve", "session", "ok", null);
  await audit("p-oauth", "propose", "mcp", "error", "oauth:c0"); // a refused attempt says nothing of who proposed it
  await audit("p-oauth", "propose", "mcp", "ok", "oauth:c1");
  await audit("p-oauth", "reject", "session", "ok", null);
  await audit("p-session", "propose", "session", "ok", null);
  // p-silent: its audit rows were pruned; nothing is made up.

  t.same(await migrateTestDatabase(db, allMigrations), since);
  const rows = (
    await sql<{ id: string; proposer_actor: string | null; proposer_credential: string | null; proposer_name: string | null; decided_by: string | null }>`
    select id, proposer_actor, proposer_credential, proposer_name, decided_by from host_proposal order by id`.execute(db)
  ).rows;
  t.same(rows, [
    { id: "p-oauth", proposer_actor: "mcp", proposer_credential: "oauth:c1", proposer_name: null, decided_by: "session" },
    { id: "p-session", proposer_actor: "session", proposer_credential: null, proposer_name: null, decided_by: null },
    { id: "p-silent", proposer_actor: null, proposer_credential: null, proposer_name: null, decided_by: null },
    { id: "p-token", proposer_actor: "token", proposer_credential: "token:t1", proposer_name: null, decided_by: "session" },
  ]);
});

t.test("0111: a device's stored tools survive the change to json, and a new hello keeps the schema's own order", async (t) => {
  const { database, since } = await databaseBefore(t, "0111");
  const db = database.db;
  await sql`insert into "user" (id, name, email, "emailVerified", "createdAt", "updatedAt") values ('u1', 'Old', 'old@example.com', false, now(), now())`.execute(
    db,
  );
  const tool = (order: string[]): AnnouncedTool => ({
    name: "read_file",
    class: "read",
    description: "Read",
    inputSchema: { type: "object", properties: Object.fromEntries(order.map((key) => [key, { type: "string" }])) },
  });
  await sql`insert into host_device (id, user_id, name, platform, token_hash, tools) values ('d1', 'u1', 'old-box', 'linux', 'h1', ${JSON.stringify([tool(["path", "startLine", "endLine"])])}::jsonb)`.execute(
    db,
  );
  const storedBefore = await announcedTools(db, "d1");
  t.same(
    Object.keys((storedBefore![0]!.inputSchema as { properties: object }).properties),
    ["path", "endLine", "startLine"],
    "jsonb had sorted the keys (shortest first)",
  );

  t.same(await migrateTestDatabase(db, allMigrations), since);
  t.same(await announcedTools(db, "d1"), storedBefore, "the row reads the same after the migration");
  await recordHello(db, "d1", { tools: [tool(["path", "startLine", "endLine"])], roots: ["/home/old"], agent: "tether-host/0.1.0" });
  const after = await announcedTools(db, "d1");
  t.same(
    Object.keys((after![0]!.inputSchema as { properties: object }).properties),
    ["path", "startLine", "endLine"],
    "the next hello is stored in the order sent",
  );
});
