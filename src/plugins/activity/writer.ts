import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import type { ActivityEntry } from "./events.js";

/** Longest user agent kept: enough to tell browsers apart, bounded whatever a client sends. */
const USER_AGENT_MAX_LENGTH = 400;

export interface ActivityWriter {
  /** Queues the entry and returns at once: the write happens after the response, in a batch. */
  record(entry: ActivityEntry): void;
  /** Writes everything queued so far (tests, shutdown). */
  flush(): Promise<void>;
}

/**
 * Writes audit rows off the request path: entries queue in memory and go to the database in one
 * multi-row insert on the next turn of the event loop. A failed batch is reported to `onError` and
 * dropped: an unavailable database must not fail or slow the request that produced the event.
 */
export function createActivityWriter(db: Kysely<Database>, onError: (error: unknown) => void): ActivityWriter {
  let queue: ActivityEntry[] = [];
  let pending: Promise<void> | null = null;

  const writeBatch = async (): Promise<void> => {
    while (queue.length > 0) {
      const batch = queue;
      queue = [];
      try {
        await db.insertInto("host_audit").values(batch.map(toRow)).execute();
      } catch (error) {
        onError(error);
      }
    }
  };

  const schedule = () => {
    pending ??= new Promise<void>((resolve) => setImmediate(resolve))
      .then(writeBatch)
      .finally(() => {
        pending = null;
        if (queue.length > 0) schedule();
      });
  };

  return {
    record(entry) {
      queue.push(entry);
      schedule();
    },
    async flush() {
      while (pending || queue.length > 0) {
        if (!pending) schedule();
        await pending;
      }
    },
  };
}

function toRow(entry: ActivityEntry) {
  return {
    user_id: entry.userId,
    event: entry.event,
    actor: entry.actor,
    outcome: entry.outcome,
    error_code: entry.errorCode ?? null,
    ip_address: entry.ipAddress ?? null,
    user_agent: entry.userAgent ? entry.userAgent.slice(0, USER_AGENT_MAX_LENGTH) : null,
    detail: entry.detail ? JSON.stringify(entry.detail) : null,
    device_id: null,
    proposal_id: null,
    tool: null,
    mode: null,
    input_digest: null,
    duration_ms: null,
  };
}
