import { sql } from "kysely";
import t from "tap";
import { allMigrations } from "../../migrations/index.js";
import { migrateToLatest, RENAMED_MIGRATIONS } from "../../src/db/migrate.js";
import { openTestDatabase } from "../helpers/database.js";

const appliedNames = async (db: Parameters<typeof migrateToLatest>[0]) =>
  (await sql<{ name: string }>`select name from kysely_migration order by timestamp, name`.execute(db)).rows.map((row) => row.name);

t.test("no two migrations share a number", async (t) => {
  const numbers = Object.keys(allMigrations).sort().map((name) => name.split("_")[0]);
  t.same(numbers, [...new Set(numbers)], "unique");
});

t.test("a database migrated under the old names migrates cleanly and keeps its data", async (t) => {
  // The migrations as an older release named them (two shared 0002_).
  const oldName = new Map(RENAMED_MIGRATIONS.map(([from, to]) => [to, from]));
  const legacy = Object.fromEntries(Object.entries(allMigrations).map(([name, migration]) => [oldName.get(name) ?? name, migration]));
  t.ok("0002_session_invalidation" in legacy && "0003_host" in legacy, "the old names");
  const database = await openTestDatabase(legacy);
  t.teardown(() => database.close());
  await sql`insert into "user" (id, name, email, "emailVerified", "createdAt", "updatedAt") values ('u1', 'Old', 'old@example.com', false, now(), now())`.execute(database.db);

  t.same(await migrateToLatest(database.db, allMigrations), [], "nothing to run again");
  t.same(await appliedNames(database.db), Object.keys(allMigrations).sort(), "the applied rows carry today's names, in order");
  t.same(await migrateToLatest(database.db, allMigrations), [], "and a second start is as quiet");
  const users = await sql<{ email: string }>`select email from "user"`.execute(database.db);
  t.same(users.rows, [{ email: "old@example.com" }], "the data is untouched");
});

t.test("a new database gets today's names", async (t) => {
  const database = await openTestDatabase();
  t.teardown(() => database.close());
  t.same(await appliedNames(database.db), Object.keys(allMigrations).sort());
});
