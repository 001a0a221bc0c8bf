import { mkdir } from "node:fs/promises";
import path from "node:path";
import { Kysely, PGliteDialect, PostgresDialect } from "kysely";
import pg from "pg";
import { startPgliteThread } from "./pglite-thread.js";
import { listenWithPg, listenWithPglite, type HeartbeatOptions, type NotificationSource } from "./notifications.js";
import type { Database } from "./schema.js";

export type DatabaseTarget =
  | {
      kind: "postgres";
      url: string;
      schema?: string;
      /** The LISTEN connection's heartbeat (defaults: every 1 s, bound 5 s); see notifications.ts. */
      listenHeartbeat?: HeartbeatOptions;
    }
  | { kind: "pglite"; dataDir: string }
  | {
      kind: "pglite-memory";
      /**
       * A `dumpDataDir()` of a database to start from. Loading a copy of an already migrated database takes a
       * fraction of what a fresh `initdb` plus the migrations take, which is most of a test file's start-up.
       */
      snapshot?: Blob;
    };

export interface DatabaseHandle {
  db: Kysely<Database>;
  kind: DatabaseTarget["kind"];
  /** LISTEN on a channel; see notifications.ts. */
  listen: NotificationSource;
  /**
   * Hears of pooled connections the server ended (a restart, `pg_terminate_backend`, a failover,
   * `idle_session_timeout`): the pool has already dropped them and opens new ones on demand. On PGlite,
   * hears that its worker thread stopped: queries answer 503 until it is back (on disk it opens the
   * database again by itself; in memory it stays down, its data gone with it). For logs.
   */
  onConnectionError(listener: (error: Error) => void): void;
  close(): Promise<void>;
}

/** `application_name` of the one connection that LISTENs for session invalidations. */
export const LISTEN_APPLICATION_NAME = "tether-listen";

/** How long a request waits for a new connection when the database is unreachable, before it fails (503). */
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * One Kysely instance for the whole app: a `pg` pool for a real server, or embedded PGlite
 * (persisted in a directory, or in memory for tests) so a fresh clone runs with no server.
 */
export async function openDatabase(target: DatabaseTarget): Promise<DatabaseHandle> {
  if (target.kind === "postgres") {
    const pool = new pg.Pool({
      connectionString: target.url,
      max: 10,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
      // Names the connections in pg_stat_activity, so an operator can tell (and a test can find) them.
      application_name: "tether",
      // A schema per test file keeps parallel test processes apart on one database.
      ...(target.schema ? { options: `-c search_path=${target.schema}` } : {}),
    });
    // An idle pooled connection the server ends emits `error` on the pool; with no listener that
    // is an uncaught exception and the process dies. The pool has already discarded the connection.
    const listeners = new Set<(error: Error) => void>();
    pool.on("error", (error) => {
      for (const listener of listeners) listener(error);
    });
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    const listen = listenWithPg({ connectionString: target.url, application_name: LISTEN_APPLICATION_NAME }, target.listenHeartbeat);
    return { db, kind: target.kind, listen, onConnectionError: (listener) => listeners.add(listener), close: () => db.destroy() };
  }
  let dataDir: string | undefined;
  if (target.kind === "pglite") {
    dataDir = path.join(target.dataDir, "pglite");
    await mkdir(dataDir, { recursive: true });
  }
  // PGlite runs in a worker thread of its own: its queries never hold up the request thread.
  const pglite = await startPgliteThread(target.kind === "pglite-memory" ? { snapshot: target.snapshot } : { dataDir });
  const db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite }) });
  const close = async () => {
    await db.destroy();
    // Kysely closes PGlite only if it ever ran a query; the thread must end either way (it keeps the process alive).
    await pglite.close();
  };
  return { db, kind: target.kind, listen: listenWithPglite(pglite), onConnectionError: (listener) => pglite.onStopped(listener), close };
}
