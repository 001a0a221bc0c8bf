import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { Kysely, PGliteDialect, sql } from "kysely";
import tap from "tap";
import type { Migration } from "kysely/migration";
import { openDatabase, type DatabaseHandle } from "../../src/db/connect.js";
import { migrateToLatest } from "../../src/db/migrate.js";
import type { Database } from "../../src/db/schema.js";
import { allMigrations } from "../../migrations/index.js";
import { closeIdleDatabases, openPooledDatabase } from "./pglite-pool.js";
import { runsInArea } from "./run-area.js";

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
    const snapshot = migrations === allMigrations ? await migratedSnapshot() : undefined;
    const handle = snapshot ? await pooledDatabase(snapshot) : await openDatabase({ kind: "pglite-memory" });
    // On a snapshot this finds nothing to do; it still proves the snapshot is the current schema.
    await migrateToLatest(handle.db, migrations);
    return handle;
  }
  const schema = `t_${process.pid}_${randomBytes(4).toString("hex")}`;
  const handle = await openDatabase({ kind: "postgres", url: TEST_DATABASE_URL, schema });
  const drop = () => sql`drop schema if exists ${sql.id(schema)} cascade`.execute(handle.db).catch(() => {});
  try {
    await whileNoSchemaChanges(async () => {
      await sql`create schema ${sql.id(schema)}`.execute(handle.db);
      await migrateToLatest(handle.db, migrations);
    });
  } catch (error) {
    // Leave no half-made schema behind.
    await whileNoSchemaChanges(drop);
    await handle.close();
    throw error;
  }
  return {
    ...handle,
    async close() {
      await whileNoSchemaChanges(drop);
      await handle.close();
    },
  };
}

/** `migrateToLatest` on a test database, as `openTestDatabase` migrates (on PostgreSQL, while no other test process makes or drops a schema). */
export function migrateTestDatabase(db: DatabaseHandle["db"], migrations: Record<string, Migration>): Promise<string[]> {
  return TEST_DATABASE_URL ? whileNoSchemaChanges(() => migrateToLatest(db, migrations)) : migrateToLatest(db, migrations);
}

/** Any constant: the advisory lock every test process on one PostgreSQL takes to make or drop its schema. */
const SCHEMA_CHANGES_LOCK = 72_016_001;

/**
 * Runs `step` while no other test process makes or drops a schema. Why: Kysely's Migrator decides whether its
 * tables exist by introspecting every table of every schema (`pg_get_serial_sequence` on each column), which fails
 * with "schema … does not exist" when another session drops a schema meanwhile: test files running in parallel
 * on one server saw that in CI-like runs (`npm run test:coverage` on PostgreSQL, 5 failures in the plugins area).
 */
async function whileNoSchemaChanges<T>(step: () => Promise<T>): Promise<T> {
  const admin = await openDatabase({ kind: "postgres", url: TEST_DATABASE_URL! });
  try {
    // One connection holds the session-level lock from taking it to releasing it.
    return await admin.db.connection().execute(async (connection) => {
      await sql`select pg_advisory_lock(${SCHEMA_CHANGES_LOCK})`.execute(connection);
      try {
        return await step();
      } finally {
        await sql`select pg_advisory_unlock(${SCHEMA_CHANGES_LOCK})`.execute(connection);
      }
    });
  } finally {
    await admin.close();
  }
}

let poolClosedAtEnd = false;
/** A database from the pool (test/helpers/pglite-pool.ts), whose idle threads close when the process's tests end. */
function pooledDatabase(snapshot: Blob): Promise<DatabaseHandle> {
  // The area runner (test/helpers/run-area.ts) closes them after its last file; a file run alone, at its end.
  if (!poolClosedAtEnd && !runsInArea()) tap.teardown(closeIdleDatabases);
  poolClosedAtEnd = true;
  return openPooledDatabase(snapshot);
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SNAPSHOT_DIR = path.join(ROOT, "node_modules/.cache/tether");
let snapshotOnce: Promise<Blob> | undefined;

/**
 * A PGlite data directory with every migration applied, as a tar, made once and kept in node_modules/.cache.
 * A fresh in-memory PGlite runs initdb (seconds on two busy cores) and then the migrations; loading this copy
 * takes a fraction of that, and nearly every test file opens one. The file name hashes PGlite's version and
 * the migrations' source, so any change to either makes a new snapshot (and removes the old ones).
 */
export function migratedSnapshot(): Promise<Blob> {
  snapshotOnce ??= (async () => {
    const fingerprint = await snapshotFingerprint();
    const file = path.join(SNAPSHOT_DIR, `pglite-migrated-${fingerprint}.tar`);
    const existing = await readFile(file).catch(() => undefined);
    if (existing) return new Blob([existing]);
    const pglite = new PGlite();
    const db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite }) });
    try {
      await migrateToLatest(db, allMigrations);
      const tar = await pglite.dumpDataDir("none");
      await keepSnapshot(file, tar).catch(() => {}); // a read-only checkout still runs, only slower
      return tar;
    } finally {
      await db.destroy();
    }
  })();
  return snapshotOnce;
}

async function keepSnapshot(file: string, tar: Blob): Promise<void> {
  await mkdir(SNAPSHOT_DIR, { recursive: true });
  // Parallel test files may build it at once: each writes its own file and renames it into place.
  const partial = `${file}.${process.pid}.partial`;
  await writeFile(partial, Buffer.from(await tar.arrayBuffer()));
  await rename(partial, file);
  for (const name of await readdir(SNAPSHOT_DIR)) {
    if (name.startsWith("pglite-migrated-") && path.join(SNAPSHOT_DIR, name) !== file) {
      await rm(path.join(SNAPSHOT_DIR, name), { force: true });
    }
  }
}

async function snapshotFingerprint(): Promise<string> {
  const hash = createHash("sha256");
  const pglitePackage = JSON.parse(await readFile(path.join(ROOT, "node_modules/@electric-sql/pglite/package.json"), "utf8")) as { version: string };
  hash.update(`pglite ${pglitePackage.version}\n`);
  // The migrations' whole source (a helper they import included), and the code that applies them.
  const files = (await readdir(path.join(ROOT, "migrations"))).sort().map((name) => path.join("migrations", name));
  for (const file of [...files, "src/db/migrate.ts"]) hash.update(`${file}\n${await readFile(path.join(ROOT, file), "utf8")}\n`);
  return hash.digest("hex").slice(0, 16);
}

/** How many rows `table` holds. */
export async function rowCount(db: DatabaseHandle["db"], table: keyof Database): Promise<number> {
  return Number(
    (
      await db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll().as("n"))
        .executeTakeFirstOrThrow()
    ).n,
  );
}
