// @ts-check
/**
 * The embedded PGlite, in a worker thread of its own (started by pglite-thread.ts). PGlite is
 * PostgreSQL compiled to WebAssembly: every query runs on the thread that owns it. On the request
 * thread a batch of audit rows blocked every request for milliseconds; here it runs beside the
 * request thread, which only posts messages.
 *
 * Plain JavaScript, type-checked through JSDoc: a worker thread does not run the process's `--import
 * tsx` hooks on Node 20, and registering tsx inside each worker cost ~0.65 s per database opened.
 */
import { parentPort, workerData } from "node:worker_threads";
import { PGlite } from "@electric-sql/pglite";

/** @typedef {import("./pglite-thread.js").PgliteRequest} PgliteRequest */
/** @typedef {import("./pglite-thread.js").PgliteReply} PgliteReply */
/** @typedef {import("./pglite-thread.js").PgliteWorkerData} PgliteWorkerData */
/** @typedef {import("./pglite-thread.js").SerializedError} SerializedError */
/** @typedef {import("@electric-sql/pglite").Transaction} Transaction */

/**
 * An open transaction: the worker side holds PGlite's transaction open until `end` arrives.
 * @typedef {object} OpenTransaction
 * @property {Transaction | undefined} tx Set once PGlite has begun it (it waits for any other transaction to end first).
 * @property {(commit: boolean) => void} end
 * @property {Promise<void>} done Settles when PGlite has committed or rolled it back; rejects with the COMMIT's error.
 */

if (!parentPort) throw new Error("pglite-worker.js runs as a worker thread (see pglite-thread.ts)");
const port = parentPort;
const { dataDir, snapshot } = /** @type {PgliteWorkerData} */ (workerData);

/** @param {PgliteReply} message */
const reply = (message) => port.postMessage(message);
/** @param {number} id @param {unknown} error */
const fail = (id, error) => reply({ id, ok: false, error: serializeError(error) });

/** @type {Map<number, OpenTransaction>} */
const transactions = new Map();
/** @type {Map<string, () => Promise<void>>} */
const unlisteners = new Map();

try {
  const pglite = snapshot ? new PGlite({ loadDataDir: snapshot }) : new PGlite(dataDir);
  await pglite.waitReady;
  port.on("message", (/** @type {PgliteRequest} */ request) => {
    void handle(pglite, request);
  });
  port.postMessage({ ready: true });
} catch (error) {
  port.postMessage({ ready: false, error: serializeError(error) });
}

/** @param {PGlite} pglite @param {PgliteRequest} request */
async function handle(pglite, request) {
  const { id } = request;
  try {
    switch (request.type) {
      case "query": {
        const target = request.transaction === undefined ? pglite : transactions.get(request.transaction)?.tx;
        if (!target) throw new Error("The transaction has already ended.");
        const { rows, affectedRows } = await target.query(request.sql, request.params, { rowMode: "object" });
        return reply({ id, ok: true, rows, affectedRows });
      }
      case "begin": {
        // The request's id names the transaction: ids are unique across restarts of this thread, so a late
        // `end` meant for a transaction of a thread that died cannot end another caller's.
        const transaction = id;
        /** @type {() => void} */
        let begun = () => {};
        const started = new Promise((resolve) => (begun = () => resolve(undefined)));
        /** @type {OpenTransaction} */
        const open = { tx: undefined, end: () => {}, done: Promise.resolve() };
        open.done = pglite
          .transaction(async (tx) => {
            const commit = new Promise((resolve) => (open.end = resolve));
            open.tx = tx;
            begun();
            if (!(await commit)) await tx.rollback();
          })
          .finally(() => transactions.delete(transaction));
        transactions.set(transaction, open);
        // A transaction that fails before it begins (the database closed) settles `done` first.
        await Promise.race([started, open.done]);
        return reply({ id, ok: true, transaction });
      }
      case "end": {
        const open = transactions.get(request.transaction);
        if (!open) throw new Error("The transaction has already ended.");
        open.end(request.commit);
        await open.done;
        return reply({ id, ok: true });
      }
      case "listen": {
        const channel = request.channel;
        if (!unlisteners.has(channel)) {
          unlisteners.set(channel, await pglite.listen(channel, (payload) => port.postMessage({ notification: channel, payload })));
        }
        return reply({ id, ok: true });
      }
      case "unlisten": {
        const unlisten = unlisteners.get(request.channel);
        unlisteners.delete(request.channel);
        if (unlisten && !pglite.closed) await unlisten();
        return reply({ id, ok: true });
      }
      case "close": {
        if (!pglite.closed) await pglite.close();
        reply({ id, ok: true });
        port.close();
        return;
      }
    }
  } catch (error) {
    fail(id, error);
  }
}

/**
 * An error crosses threads as its message and own fields (SQLSTATE `code`, `detail`, `constraint`…).
 * @param {unknown} error
 * @returns {SerializedError}
 */
function serializeError(error) {
  if (!(error instanceof Error)) return { name: "Error", message: String(error), fields: {} };
  /** @type {Record<string, unknown>} */
  const fields = {};
  for (const [key, value] of Object.entries(error)) {
    if (value === undefined || typeof value === "function") continue;
    if (typeof value === "object" && value !== null && !Array.isArray(value)) continue;
    fields[key] = value;
  }
  return { name: error.name, message: error.message, fields };
}
