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
  { id: number; ok: true; rows?: unknown[]; affectedRows?: number; transaction?: number } | { id: number; ok: false; error: SerializedError };

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
  const supervisor = new Supervisor(options);
  await supervisor.start();
  return {
    get ready() {
      return !supervisor.stopped && !supervisor.closed;
    },
    waitReady: Promise.resolve(),
    // Only close() closes it: a stopped thread is an outage (57P02, a 503), and Kysely would report a
    // closed instance with a plain error (a 500).
    get closed() {
      return supervisor.closed;
    },
    query: (sql, params) => supervisor.query(sql, params),
    transaction: (callback) => runTransaction(supervisor, callback),
    listen: (channel, handlers) => supervisor.channels.listen(channel, handlers),
    onStopped(listener) {
      supervisor.stoppedListeners.add(listener);
    },
    close: () => supervisor.close(),
  };
}

type Request = DistributiveOmit<PgliteRequest, "id">;
type Success = PgliteReply & { ok: true };

/**
 * The thread and its lifecycle: the worker answering now, whether the database is stopped (and why),
 * and the restarts after a loss. Every request goes through `ask`, which fails at once while the
 * database is stopped or closed.
 */
class Supervisor {
  private worker!: Worker;
  closed = false;
  /** Set while the thread is down: why every query fails now. */
  stopped: Error | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private restarting: Promise<void> | undefined;
  private readonly replies = new PendingReplies();
  readonly channels = new Channels(this);
  readonly stoppedListeners = new Set<(error: Error) => void>();
  private readonly restartable: boolean;

  constructor(private readonly options: PgliteThreadOptions) {
    this.restartable = options.dataDir !== undefined;
  }

  async start(): Promise<void> {
    this.worker = await this.spawn();
  }

  /** A new thread, resolved once its PGlite is open; its later loss is `lost`. */
  private async spawn(): Promise<Worker> {
    const started = await spawnWorker(this.options, (message) => {
      if ("notification" in message) this.channels.deliver(message.notification, message.payload);
      else this.replies.settle(message);
    });
    started.on("error", (error) => this.lost(started, error));
    started.on("exit", (code) => this.lost(started, new Error(`the embedded database's thread exited (code ${code})`)));
    return started;
  }

  /** `from` is gone: nothing it was asked will be answered. The first loss stops the database (and restarts it). */
  private lost(from: Worker, cause: Error): void {
    if (from !== this.worker) return;
    const error = this.closed
      ? new Error("PGlite is closed")
      : Object.assign(new Error(`The embedded database stopped: ${cause.message}`, { cause }), { code: STOPPED_CODE });
    this.replies.failAll(error);
    if (this.closed || this.stopped) return; // closed on purpose, or a restart's new thread died: the restart retries
    this.stopped = error;
    for (const listener of this.stoppedListeners) listener(error);
    for (const handlers of this.channels.everyHandler()) handlers.onLost();
    if (this.restartable) this.scheduleRestart(RESTART_FIRST_DELAY_MS);
  }

  private scheduleRestart(delayMs: number): void {
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.restarting = this.restart(delayMs).finally(() => (this.restarting = undefined));
    }, delayMs);
    this.restartTimer.unref();
  }

  private async restart(delayMs: number): Promise<void> {
    try {
      this.worker = await this.spawn();
      if (this.closed) return void (await this.worker.terminate());
      // Asked of the new thread directly: the database does not count as back before its LISTENs are.
      for (const channel of this.channels.names()) await this.replies.send(this.worker, { type: "listen", channel });
    } catch {
      if (this.closed) return;
      await this.worker.terminate();
      return this.scheduleRestart(Math.min(delayMs * 2, RESTART_MAX_DELAY_MS));
    }
    this.stopped = undefined;
    for (const handlers of this.channels.everyHandler()) handlers.onReady();
  }

  ask(request: Request): Promise<Success> {
    if (this.closed && request.type !== "close") return Promise.reject(new Error("PGlite is closed"));
    if (this.stopped) return Promise.reject(this.stopped);
    return this.replies.send(this.worker, request);
  }

  async query<T>(sql: string, params: readonly unknown[] = [], transaction?: number): Promise<PGliteQueryResults<T>> {
    const reply = await this.ask({ type: "query", sql, params: params as unknown[], transaction });
    return { rows: (reply.rows ?? []) as T[], affectedRows: reply.affectedRows, fields: [] };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.restartTimer);
    await this.restarting;
    if (!this.stopped) await this.ask({ type: "close" }).catch(() => {});
    await this.worker.terminate();
  }
}

/** A new worker, resolved once its PGlite is open; a failure to open rejects (and ends the thread). */
async function spawnWorker(options: PgliteThreadOptions, onMessage: (message: PgliteReply | Notification) => void): Promise<Worker> {
  const { resourceLimits, ...workerData } = options;
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
  return started;
}

/** Requests posted to the thread and awaiting its reply, by id. */
class PendingReplies {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (reply: Success) => void; reject: (error: Error) => void }>();

  send(target: Worker, request: Request): Promise<Success> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      target.postMessage({ ...request, id });
    });
  }

  settle(reply: PgliteReply): void {
    const pending = this.waiting.get(reply.id);
    this.waiting.delete(reply.id);
    if (!pending) return;
    if (reply.ok) pending.resolve(reply);
    else pending.reject(deserializeError(reply.error));
  }

  /** The thread is gone: nothing waiting will be answered. */
  failAll(error: Error): void {
    for (const pending of this.waiting.values()) pending.reject(error);
    this.waiting.clear();
  }
}

/**
 * This process's LISTENs, by channel: one LISTEN in the thread per channel, however many listen to
 * it here. While the thread is down the channels stay registered, and the restart LISTENs again.
 */
class Channels {
  private readonly byChannel = new Map<string, Set<ChannelHandlers>>();

  constructor(private readonly supervisor: Supervisor) {}

  names(): IterableIterator<string> {
    return this.byChannel.keys();
  }

  everyHandler(): ChannelHandlers[] {
    return [...this.byChannel.values()].flatMap((set) => [...set]);
  }

  deliver(channel: string, payload: string): void {
    for (const handlers of this.byChannel.get(channel) ?? []) handlers.onMessage(payload);
  }

  async listen(channel: string, handlers: ChannelHandlers): Promise<() => Promise<void>> {
    const { supervisor } = this;
    let set = this.byChannel.get(channel);
    if (!set) {
      set = new Set();
      this.byChannel.set(channel, set);
      // While the thread is down, the restart LISTENs to every channel registered.
      if (!supervisor.stopped) {
        try {
          await supervisor.ask({ type: "listen", channel });
        } catch (error) {
          if (!supervisor.stopped) {
            this.byChannel.delete(channel);
            throw error;
          }
        }
      }
    }
    set.add(handlers);
    if (!supervisor.stopped) handlers.onReady();
    return () => this.unlisten(channel, set, handlers);
  }

  /** The last listener of a channel gone, the thread stops listening to it. */
  private async unlisten(channel: string, set: Set<ChannelHandlers>, handlers: ChannelHandlers): Promise<void> {
    set.delete(handlers);
    if (set.size > 0 || this.byChannel.get(channel) !== set) return;
    this.byChannel.delete(channel);
    if (!this.supervisor.closed && !this.supervisor.stopped) await this.supervisor.ask({ type: "unlisten", channel });
  }
}

/** A transaction as Kysely's dialect runs it: committed when the callback resolves, rolled back when it throws. */
async function runTransaction<T>(supervisor: Supervisor, callback: (tx: PGliteTransaction) => Promise<T>): Promise<T> {
  const { transaction } = await supervisor.ask({ type: "begin" });
  let ended = false;
  const end = async (commit: boolean) => {
    if (ended) return;
    ended = true;
    await supervisor.ask({ type: "end", transaction: transaction!, commit });
  };
  const tx: PGliteTransaction = {
    query: (sql, params) => supervisor.query(sql, params, transaction),
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
}

function deserializeError(serialized: SerializedError): Error {
  const error = Object.assign(new Error(serialized.message), serialized.fields);
  error.name = serialized.name;
  return error;
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
