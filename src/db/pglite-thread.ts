import { Worker } from "node:worker_threads";
import type { PGlite as KyselyPglite, PGliteQueryResults, PGliteTransaction } from "kysely";

/**
 * The embedded PGlite, run in a worker thread (src/db/pglite-worker.js) and driven from here through
 * the small interface Kysely's `PGliteDialect` calls (`query`, `transaction`, `close`), plus `listen`.
 * Why a thread: PGlite runs PostgreSQL in WebAssembly on whichever thread owns it, so in-process
 * every query — above all each batch of audit rows, one per tool call — held up every request and
 * device stream for its duration. Measured before the move (`npm run bench -- host`, one replica):
 * the same calls without audit rows ran 22–25% faster; with the database in a worker the request
 * thread only posts messages. Semantics are PGlite's own: one session, transactions exclusive (a
 * query outside an open transaction waits for it), errors keep their SQLSTATE `code` and fields.
 */

export interface PgliteWorkerData {
  dataDir?: string;
  snapshot?: Blob;
}

export type PgliteRequest =
  | { id: number; type: "query"; sql: string; params: unknown[]; transaction?: number }
  | { id: number; type: "begin" }
  | { id: number; type: "end"; transaction: number; commit: boolean }
  | { id: number; type: "listen"; channel: string }
  | { id: number; type: "unlisten"; channel: string }
  | { id: number; type: "close" };

export interface SerializedError {
  name: string;
  message: string;
  fields: Record<string, unknown>;
}

export type PgliteReply =
  | { id: number; ok: true; rows?: unknown[]; affectedRows?: number; transaction?: number }
  | { id: number; ok: false; error: SerializedError };

type WorkerMessage = PgliteReply | { ready: true } | { ready: false; error: SerializedError } | { notification: string; payload: string };

/** SQLSTATE 57P02 (crash shutdown): isDatabaseUnavailable counts it, so requests answer 503. */
const STOPPED_CODE = "57P02";

export interface PgliteThread extends KyselyPglite {
  /** LISTEN on `channel`; resolves to the function that stops listening. */
  listen(channel: string, onNotification: (payload: string) => void): Promise<() => Promise<void>>;
  /** Told when the worker stops unexpectedly (every query fails from then on). */
  onStopped(listener: (error: Error) => void): void;
}

/** The worker is plain JavaScript (see pglite-worker.js): it runs as it is from the source and from the build. */
const WORKER_URL = new URL("./pglite-worker.js", import.meta.url);

export async function startPgliteThread(options: PgliteWorkerData): Promise<PgliteThread> {
  const worker = new Worker(WORKER_URL, { workerData: options });
  const waiting = new Map<number, { resolve: (reply: PgliteReply & { ok: true }) => void; reject: (error: Error) => void }>();
  const listeners = new Map<string, Set<(payload: string) => void>>();
  const stoppedListeners = new Set<(error: Error) => void>();
  let nextId = 1;
  let closed = false;
  let stopped: Error | undefined;

  const ready = new Promise<void>((resolve, reject) => {
    const onMessage = (message: WorkerMessage) => {
      if ("ready" in message) {
        if (message.ready) resolve();
        else reject(deserializeError(message.error));
        return;
      }
      if ("notification" in message) {
        for (const listener of listeners.get(message.notification) ?? []) listener(message.payload);
        return;
      }
      const pending = waiting.get(message.id);
      waiting.delete(message.id);
      if (!pending) return;
      if (message.ok) pending.resolve(message);
      else pending.reject(deserializeError(message.error));
    };
    worker.on("message", onMessage);
    worker.once("error", reject);
    // A worker that ends without a word (or after its error) must not leave the caller waiting.
    worker.once("exit", (code) => reject(new Error(`the embedded database's thread exited before it was ready (code ${code})`)));
  });
  worker.on("error", (error) => stop(error));
  worker.on("exit", (code) => stop(new Error(`the embedded database's thread exited (code ${code})`)));

  /** The worker is gone: nothing waiting will be answered, and nothing more can be asked. */
  function stop(cause: Error): void {
    if (stopped) return;
    stopped = Object.assign(new Error(closed ? "PGlite is closed" : `The embedded database stopped: ${cause.message}`, { cause }), closed ? {} : { code: STOPPED_CODE });
    for (const pending of waiting.values()) pending.reject(stopped);
    waiting.clear();
    if (!closed) for (const listener of stoppedListeners) listener(stopped);
  }

  const ask = (request: DistributiveOmit<PgliteRequest, "id">): Promise<PgliteReply & { ok: true }> => {
    if (stopped) return Promise.reject(stopped);
    if (closed && request.type !== "close") return Promise.reject(new Error("PGlite is closed"));
    const id = nextId++;
    return new Promise((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      worker.postMessage({ ...request, id });
    });
  };

  const query = async <T>(sql: string, params: readonly unknown[] = [], transaction?: number): Promise<PGliteQueryResults<T>> => {
    const reply = await ask({ type: "query", sql, params: params as unknown[], transaction });
    return { rows: (reply.rows ?? []) as T[], affectedRows: reply.affectedRows, fields: [] };
  };

  try {
    await ready;
  } catch (error) {
    await worker.terminate();
    throw error;
  }

  return {
    get ready() {
      return !stopped && !closed;
    },
    waitReady: Promise.resolve(),
    get closed() {
      return closed || stopped !== undefined;
    },
    query: (sql, params) => query(sql, params),
    async transaction<T>(callback: (tx: PGliteTransaction) => Promise<T>): Promise<T> {
      const { transaction } = await ask({ type: "begin" });
      let ended = false;
      const end = async (commit: boolean) => {
        if (ended) return;
        ended = true;
        await ask({ type: "end", transaction: transaction!, commit });
      };
      const tx: PGliteTransaction = {
        query: (sql, params) => query(sql, params, transaction),
        rollback: () => end(false),
      };
      let result: T;
      try {
        result = await callback(tx);
      } catch (error) {
        await end(false).catch(() => {});
        throw error;
      }
      await end(true);
      return result;
    },
    async listen(channel, onNotification) {
      let set = listeners.get(channel);
      if (!set) {
        set = new Set();
        listeners.set(channel, set);
        await ask({ type: "listen", channel });
      }
      set.add(onNotification);
      return async () => {
        set.delete(onNotification);
        if (set.size > 0 || listeners.get(channel) !== set) return;
        listeners.delete(channel);
        if (!closed && !stopped) await ask({ type: "unlisten", channel });
      };
    },
    onStopped(listener) {
      stoppedListeners.add(listener);
    },
    async close() {
      if (closed || stopped) return;
      closed = true;
      await ask({ type: "close" }).catch(() => {});
      await worker.terminate();
    },
  };
}

function deserializeError(serialized: SerializedError): Error {
  const error = Object.assign(new Error(serialized.message), serialized.fields);
  error.name = serialized.name;
  return error;
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
