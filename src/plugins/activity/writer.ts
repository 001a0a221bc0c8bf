import type { BatchWriter } from "../../db/batch-writer.js";
import type { AuditRow } from "./audit-plugin.js";
import type { ActivityEntry } from "./events.js";

/** Longest user agent kept: enough to tell browsers apart, bounded whatever a client sends. */
const USER_AGENT_MAX_LENGTH = 400;

export interface ActivityWriter {
  /** Queues the entry and returns at once: the write happens after the response, in a batch. */
  record(this: void, entry: ActivityEntry): void;
  /** Writes everything queued so far (tests, shutdown). */
  flush(): Promise<void>;
}

/**
 * Account activity as audit rows, through the app's one audit writer (`createAuditWriter`, the same
 * queue as `fastify.tetherAudit`): entries queue in memory and reach the database in multi-row
 * inserts after the response; a failed batch is retried (a row the database refuses is dropped and
 * reported), so an unavailable database neither fails nor slows the request that produced the event,
 * and a clean stop loses nothing.
 */
export function createActivityWriter(rows: BatchWriter<AuditRow>): ActivityWriter {
  return {
    record: (entry) => rows.write(toRow(entry)),
    flush: () => rows.flush(),
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
