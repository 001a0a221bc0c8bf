import { mkdir } from "node:fs/promises";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { Kysely, PGliteDialect, PostgresDialect } from "kysely";
import pg from "pg";
import { listenWithPg, listenWithPglite, type NotificationSource } from "./notifications.js";
import type { Database } from "./schema.js";

export type DatabaseTarget =
  | { kind: "postgres"; url: string; schema?: string }
  | { kind: "pglite"; dataDir: string }
  | { kind: "pglite-memory" };

export interface DatabaseHandle {
  db: Kysely<Database>;
  kind: DatabaseTarget["kind"];
  /** LISTEN on a channel; see notifications.ts. */
  listen: NotificationSource;
  close(): Promise<void>;
}

/**
 * One Kysely instance for the whole app: a `pg` pool for a real server, or embedded PGlite
 * (persisted in a directory, or in memory for tests) so a fresh clone runs with no server.
 */
export async function openDatabase(target: DatabaseTarget): Promise<DatabaseHandle> {
  if (target.kind === "postgres") {
    const pool = new pg.Pool({
      connectionString: target.url,
      max: 10,
      // A schema per test file keeps parallel test processes apart on one database.
      ...(target.schema ? { options: `-c search_path=${target.schema}` } : {}),
    });
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    const listen = listenWithPg({ connectionString: target.url });
    return { db, kind: target.kind, listen, close: () => db.destroy() };
  }
  let dataDir: string | undefined;
  if (target.kind === "pglite") {
    dataDir = path.join(target.dataDir, "pglite");
    await mkdir(dataDir, { recursive: true });
  }
  const pglite = new PGlite(dataDir);
  await pglite.waitReady;
  const db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite }) });
  return { db, kind: target.kind, listen: listenWithPglite(pglite), close: () => db.destroy() };
}
