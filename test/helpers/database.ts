import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import type { Migration } from "kysely/migration";
import { openDatabase, type DatabaseHandle } from "../../src/db/connect.js";
import { migrateToLatest } from "../../src/db/migrate.js";
import { allMigrations } from "../../migrations/index.js";

/** Which database the suite runs on: PostgreSQL when TEST_DATABASE_URL is set (CI), else PGlite. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || undefined;
export const IN_CI = process.env.CI === "true" || process.env.CI === "1";

/**
 * A fresh database for one test file, migrated with `migrations` (default: all of them): an in-memory PGlite, or a schema of its own on the
 * PostgreSQL server (dropped at close) so parallel test files never see each other's rows.
 */
export async function openTestDatabase(migrations: Record<string, Migration> = allMigrations): Promise<DatabaseHandle> {
  if (!TEST_DATABASE_URL) {
    const handle = await openDatabase({ kind: "pglite-memory" });
    await migrateToLatest(handle.db, migrations);
    return handle;
  }
  const schema = `t_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = await openDatabase({ kind: "postgres", url: TEST_DATABASE_URL });
  await sql`create schema ${sql.id(schema)}`.execute(admin.db);
  await admin.close();
  const handle = await openDatabase({ kind: "postgres", url: TEST_DATABASE_URL, schema });
  try {
    await migrateToLatest(handle.db, migrations);
  } catch (error) {
    // Leave no half-made schema behind.
    await sql`drop schema ${sql.id(schema)} cascade`.execute(handle.db).catch(() => {});
    await handle.close();
    throw error;
  }
  return {
    ...handle,
    async close() {
      await sql`drop schema ${sql.id(schema)} cascade`.execute(handle.db).catch(() => {});
      await handle.close();
    },
  };
}
