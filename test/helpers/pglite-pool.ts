import { Kysely, PGliteDialect } from "kysely";
import type { DatabaseHandle } from "../../src/db/connect.js";
import { listenWithPglite } from "../../src/db/notifications.js";
import { startPgliteThread, type ChannelHandlers, type PgliteThread } from "../../src/db/pglite-thread.js";
import type { Database } from "../../src/db/schema.js";

/**
 * In-memory PGlite databases for tests, each thread used again once its borrower has closed it.
 *
 * Why: starting an embedded database from the migrated snapshot costs about 2.5 CPU seconds (a worker thread,
 * PGlite's WebAssembly, 40 MB of data directory, PostgreSQL's start), and the unit suite opens a couple of
 * hundred of them. Emptying the tables of one that a test has finished with takes a few milliseconds, and a
 * test sees exactly what it would in a fresh one: the migrated schema and no rows.
 *
 * A thread goes back to the pool only when it is certainly as good as new: it never stopped, the schema is the
 * one it started with (a test that created or dropped something discards it), and emptying it finished in time
 * (a transaction left open would make it wait). Anything else closes it. A borrower's LISTENs are ended and its
 * "stopped" listeners forgotten when it gives the thread back, so nothing of one test reaches the next.
 */
const idle: Array<{ thread: PgliteThread; schema: string }> = [];
const RESET_TIMEOUT_MS = 5_000;

/** What `pg_class`, `pg_trigger` and `pg_proc` hold in the public schema: equal only for the same schema. */
const SCHEMA_SIGNATURE = `
  select coalesce((select string_agg(c.relname || ':' || c.relkind::text, ',' order by c.relname)
    from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public'), '')
  || '|' || (select count(*) from pg_trigger where not tgisinternal)::text
  || '|' || (select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'public')::text
  as signature`;

export async function openPooledDatabase(snapshot: Blob): Promise<DatabaseHandle> {
  const pooled = idle.pop() ?? (await startThread(snapshot));
  return lease(pooled);
}

/** Set once the pool is closed: a database closed after that (a teardown that ran later) closes its thread. */
let drained = false;

/** Closes the threads waiting in the pool (they keep the process alive), and those given back from now on. */
export async function closeIdleDatabases(): Promise<void> {
  drained = true;
  const closing = idle.splice(0);
  await Promise.all(closing.map(({ thread }) => thread.close()));
}

async function startThread(snapshot: Blob): Promise<{ thread: PgliteThread; schema: string }> {
  const thread = await startPgliteThread({ snapshot });
  try {
    return { thread, schema: await signature(thread) };
  } catch (error) {
    await thread.close();
    throw error;
  }
}

async function signature(thread: PgliteThread): Promise<string> {
  const { rows } = await thread.query<{ signature: string }>(SCHEMA_SIGNATURE);
  return rows[0]!.signature;
}

function lease(pooled: { thread: PgliteThread; schema: string }): DatabaseHandle {
  const { thread } = pooled;
  let active = true;
  const unlisteners = new Set<() => Promise<void>>();
  // Kysely closes its PGlite when destroyed: this view of the thread leaves that to the pool.
  const view: PgliteThread = new Proxy(thread, {
    get: (target, property, receiver) => (property === "close" ? async () => {} : Reflect.get(target, property, receiver)),
  });
  const db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite: view }) });
  const listen = listenWithPglite({
    get closed() {
      return !active || thread.closed;
    },
    async listen(channel: string, handlers: ChannelHandlers) {
      const unlisten = await thread.listen(channel, handlers);
      const once = async () => {
        if (unlisteners.delete(once)) await unlisten();
      };
      unlisteners.add(once);
      return once;
    },
  });
  let closing: Promise<void> | undefined;
  return {
    db,
    kind: "pglite-memory",
    listen,
    onConnectionError: (listener) => thread.onStopped((error) => active && listener(error)),
    close: () =>
      (closing ??= (async () => {
        await db.destroy();
        for (const unlisten of [...unlisteners]) await unlisten().catch(() => {});
        active = false;
        if ((await emptied(pooled)) && !drained) idle.push(pooled);
        else await thread.close();
      })()),
  };
}

/** Empties every table of a thread that is still as it started; false if it is not, or it took too long. */
async function emptied({ thread, schema }: { thread: PgliteThread; schema: string }): Promise<boolean> {
  if (!thread.ready) return false;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), RESET_TIMEOUT_MS)));
  const reset = (async () => {
    if ((await signature(thread)) !== schema) return false;
    const { rows } = await thread.query<{ name: string }>(
      `select format('%I', tablename) as name from pg_tables where schemaname = 'public' and tablename not like 'kysely_migration%'`,
    );
    if (rows.length > 0) await thread.query(`truncate ${rows.map((row) => row.name).join(", ")} restart identity cascade`);
    return true;
  })().catch(() => false);
  try {
    return await Promise.race([reset, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
