import { sql, type Kysely } from "kysely";
import { type Migration, Migrator } from "kysely/migration";

export class MigrationError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "MigrationError";
  }
}

/**
 * Brings the database up to date with Kysely's Migrator; returns the names of migrations applied now.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations run on a database of any schema, as Kysely's Migrator does
export async function migrateToLatest(db: Kysely<any>, migrations: Record<string, Migration>): Promise<string[]> {
  // Without a schema, Kysely's Migrator looks for its bookkeeping tables in every schema it can see:
  // when another schema of the same database has them (another app, or a test schema per process),
  // it skips creating its own and then fails ("relation kysely_migration_lock does not exist").
  const schema = (await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db)).rows[0]?.schema ?? undefined;
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    // Each plugin's set depends only on sets that sort before it, so an app that started with `authMigrations`
    // can add `hostMigrations` later: their older numbers run then, in order, instead of being refused as
    // out of order (Kysely's default, meant for one linear history).
    allowUnorderedMigrations: true,
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
