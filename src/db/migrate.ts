import { sql, type Kysely } from "kysely";
import { type Migration, Migrator } from "kysely/migration";

export class MigrationError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "MigrationError";
  }
}

/**
 * Migrations renamed since a release (two shared the number 0002), as `[old, new]`, applied in this
 * order: a new name may be another's old one. Kysely's Migrator refuses a database whose applied
 * migrations it cannot find by name, so their rows are renamed first. `0002_session_invalidation`
 * marks a database from before the renames; no other database is touched.
 */
export const RENAMED_MIGRATIONS: ReadonlyArray<readonly [from: string, to: string]> = [
  ["0003_host", "0004_host"],
  ["0002_session_invalidation", "0003_session_invalidation"],
];

async function renameAppliedMigrations(db: Kysely<any>, schema: string | undefined): Promise<void> {
  const table = schema ? sql`${sql.id(schema)}.kysely_migration` : sql`kysely_migration`;
  const exists = (await sql<{ found: string | null }>`select to_regclass(${schema ? `"${schema}".kysely_migration` : "kysely_migration"})::text as found`.execute(db)).rows[0]?.found;
  if (!exists) return;
  const marker = "0002_session_invalidation";
  const legacy = (await sql<{ name: string }>`select name from ${table} where name = ${marker}`.execute(db)).rows.length > 0;
  if (!legacy) return;
  await db.transaction().execute(async (trx) => {
    for (const [from, to] of RENAMED_MIGRATIONS) await sql`update ${table} set name = ${to} where name = ${from}`.execute(trx);
  });
}

/**
 * Brings the database up to date with Kysely's Migrator; returns the names of migrations applied now.
 * A database migrated by an older release has its renamed migrations' rows renamed first.
 */
export async function migrateToLatest(db: Kysely<any>, migrations: Record<string, Migration>): Promise<string[]> {
  // Without a schema, Kysely's Migrator looks for its bookkeeping tables in every schema it can see:
  // when another schema of the same database has them (another app, or a test schema per process),
  // it skips creating its own and then fails ("relation kysely_migration_lock does not exist").
  const schema = (await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db)).rows[0]?.schema ?? undefined;
  await renameAppliedMigrations(db, schema);
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    ...(schema ? { migrationTableSchema: schema } : {}),
  });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === "Error");
  if (error || failed) {
    const name = failed ? ` (${failed.migrationName})` : "";
    throw new MigrationError(`Migration failed${name}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  return (results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName);
}
