import { Worker, type ResourceLimits } from "node:worker_threads";
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

type Notification = { notification: string; payload: string };
type WorkerMessage = PgliteReply | Notification | { ready: true } | { ready: false; error: SerializedError };

/** SQLSTATE 57P02 (crash shutdown): isDatabaseUnavailable counts it, so requests answer 503. */
const STOPPED_CODE = "57P02";
/** After the thread dies, the first restart waits this long; each failed attempt doubles it, up to the maximum. */
const RESTART_FIRST_DELAY_MS = 100;
const RESTART_MAX_DELAY_MS = 5_000;

export interface PgliteThreadOptions extends PgliteWorkerData {
  /**
   * Node's `resourceLimits` for the database's thread. A query whose result does not fit ends that
   * thread (ERR_WORKER_OUT_OF_MEMORY), never the process: on disk it restarts, in memory it stays down.
   */
  resourceLimits?: ResourceLimits;
}

/** What a LISTEN is told: payloads, and when the thread stopped (anything may be missed) and is back. */
export interface ChannelHandlers {
  onMessage(payload: string): void;
  onLost(): void;
  onReady(): void;
}

export interface PgliteThread extends KyselyPglite {
  /**
   * LISTEN on `channel`, again after every restart; `onReady` is called once the LISTEN is live (at
   * once, or when the thread is back). Resolves to the function that stops listening.
   */
  listen(channel: string, handlers: ChannelHandlers): Promise<() => Promise<void>>;
  /** Told each time the thread stops unexpectedly: queries fail (57P02) until it is back. */
  onStopped(listener: (error: Error) => void): void;
}

/** The worker is plain JavaScript (see pglite-worker.js): it runs as it is from the source and from the build. */
const WORKER_URL = new URL("./pglite-worker.js", import.meta.url);

/**
 * Starts the database's thread and resolves once PGlite is open. If the thread dies later (its heap
 * exhausted, a fault in PGlite), queries fail at once with 57P02, which requests answer as 503; a
 * database on disk is then opened again in a new thread (PGlite recovers from its WAL, as PostgreSQL
 * after a crash), with backoff, and LISTENs resume. One in memory stays down: its data died with the
 * thread, and coming back empty would be worse than a 503.
 */
export async function startPgliteThread(options: PgliteThreadOptions): Promise<PgliteThread> {
  const { resourceLimits, ...workerData } = options;
  const restartable = workerData.dataDir !== undefined;
  const waiting = new Map<number, { resolve: (reply: PgliteReply & { ok: true }) => void; reject: (error: Error) => void }>();
  const channels = new Map<string, Set<ChannelHandlers>>();
  const stoppedListeners = new Set<(error: Error) => void>();
  let nextId = 1;
  let closed = false;
  /** Set while the thread is down: why every query fails now. */
  let stopped: Error | undefined;
  let restartTimer: NodeJS.Timeout | undefined;
  let restarting: Promise<void> | undefined;

  const onMessage = (message: PgliteReply | Notification) => {
    if ("notification" in message) {
      for (const handlers of channels.get(message.notification) ?? []) handlers.onMessage(message.payload);
      return;
    }
    const pending = waiting.get(message.id);
    waiting.delete(message.id);
    if (!pending) return;
    if (message.ok) pending.resolve(message);
    else pending.reject(deserializeError(message.error));
  };

  /** A new thread, resolved once its PGlite is open; a failure to open rejects (and ends the thread). */
  async function spawn(): Promise<Worker> {
    const started = new Worker(WORKER_URL, { workerData, ...(resourceLimits ? { resourceLimits } : {}) });
    try {
      await new Promise<void>((resolve, reject) => {
        started.on("message", (message: WorkerMessage) => {
          if (!("ready" in message)) return onMessage(message);
          if (message.ready) resolve();
          else reject(deserializeError(message.error));
        });
        started.once("error", reject);
        // A worker that ends without a word (or after its error) must not leave the caller waiting.
        started.once("exit", (code) => reject(new Error(`the embedded database's thread exited before it was ready (code ${code})`)));
      });
    } catch (error) {
      await started.terminate();
      throw error;
    }
    started.on("error", (error) => lost(started, error));
    started.on("exit", (code) => lost(started, new Error(`the embedded database's thread exited (code ${code})`)));
    return started;
  }

  let worker = await spawn();

  /** `from` is gone: nothing it was asked will be answered. The first loss stops the database (and restarts it). */
  function lost(from: Worker, cause: Error): void {
    if (from !== worker) return;
    const error = closed
      ? new Error("PGlite is closed")
      : Object.assign(new Error(`The embedded database stopped: ${cause.message}`, { cause }), { code: STOPPED_CODE });
    for (const pending of waiting.values()) pending.reject(error);
    waiting.clear();
    if (closed || stopped) return; // closed on purpose, or a restart's new thread died: the restart retries
    stopped = error;
    for (const listener of stoppedListeners) listener(error);
    for (const handlers of everyChannelHandler()) handlers.onLost();
    if (restartable) scheduleRestart(RESTART_FIRST_DELAY_MS);
  }

  function scheduleRestart(delayMs: number): void {
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      restarting = restart(delayMs).finally(() => (restarting = undefined));
    }, delayMs);
    restartTimer.unref();
  }

  async function restart(delayMs: number): Promise<void> {
    try {
      worker = await spawn();
      if (closed) return void (await worker.terminate());
      for (const channel of channels.keys()) await send(worker, { type: "listen", channel });
    } catch {
      if (closed) return;
      await worker.terminate();
      return scheduleRestart(Math.min(delayMs * 2, RESTART_MAX_DELAY_MS));
    }
    stopped = undefined;
    for (const handlers of everyChannelHandler()) handlers.onReady();
  }

  const everyChannelHandler = () => [...channels.values()].flatMap((set) => [...set]);

  /** Asks `target` directly: the restart uses it before the database counts as back. */
  const send = (target: Worker, request: DistributiveOmit<PgliteRequest, "id">): Promise<PgliteReply & { ok: true }> => {
    const id = nextId++;
    return new Promise((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      target.postMessage({ ...request, id });
    });
  };

  const ask = (request: DistributiveOmit<PgliteRequest, "id">): Promise<PgliteReply & { ok: true }> => {
    if (closed && request.type !== "close") return Promise.reject(new Error("PGlite is closed"));
    if (stopped) return Promise.reject(stopped);
    return send(worker, request);
  };

  const query = async <T>(sql: string, params: readonly unknown[] = [], transaction?: number): Promise<PGliteQueryResults<T>> => {
    const reply = await ask({ type: "query", sql, params: params as unknown[], transaction });
    return { rows: (reply.rows ?? []) as T[], affectedRows: reply.affectedRows, fields: [] };
  };

  return {
    get ready() {
      return !stopped && !closed;
    },
    waitReady: Promise.resolve(),
    // Only close() closes it: a stopped thread is an outage (57P02, a 503), and Kysely would report a
    // closed instance with a plain error (a 500).
    get closed() {
      return closed;
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
    async listen(channel, handlers) {
      let set = channels.get(channel);
      if (!set) {
        set = new Set();
        channels.set(channel, set);
        // While the thread is down, the restart LISTENs to every channel in `channels`.
        if (!stopped) {
          try {
            await ask({ type: "listen", channel });
          } catch (error) {
            if (!stopped) {
              channels.delete(channel);
              throw error;
            }
          }
        }
      }
      set.add(handlers);
      if (!stopped) handlers.onReady();
      return async () => {
        set.delete(handlers);
        if (set.size > 0 || channels.get(channel) !== set) return;
        channels.delete(channel);
        if (!closed && !stopped) await ask({ type: "unlisten", channel });
      };
    },
    onStopped(listener) {
      stoppedListeners.add(listener);
    },
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(restartTimer);
      await restarting;
      if (!stopped) await ask({ type: "close" }).catch(() => {});
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
