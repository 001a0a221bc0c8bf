import fp from "fastify-plugin";
import type { Insertable, Kysely } from "kysely";
import { createBatchWriter, type BatchWriter, type BatchWriterOptions } from "../../db/batch-writer.js";
import { ACTIVITY_EVENT_COLUMNS, type Database, type ActivityEventTable } from "../../db/schema.js";

export type AuditRow = Insertable<ActivityEventTable>;

declare module "fastify" {
  interface FastifyInstance {
    /**
     * The audit log's writer: `fastify.tetherAudit.write(row)` queues a `activity_event` row and returns at
     * once; rows reach the database in batches, and every queued row is written before the app closes.
     * Tests call `await fastify.tetherAudit.flush()` before reading the table. See src/db/batch-writer.ts.
     */
    tetherAudit: BatchWriter<AuditRow>;
  }
}

export interface AuditPluginOptions {
  /** Longest a row waits before its batch is written (default 50 ms). */
  flushIntervalMs?: number;
  /**
   * The writer to decorate, when the app made it before Fastify (better-auth's hooks, created before
   * any plugin, record sign-in events through it): one writer, one queue, one flush on close.
   */
  writer?: BatchWriter<AuditRow>;
}

/** The audit log's batch writer (see src/db/batch-writer.ts): one per app. */
export function createAuditWriter(db: Kysely<Database>, options: Pick<BatchWriterOptions, "flushIntervalMs" | "onError"> = {}): BatchWriter<AuditRow> {
  return createBatchWriter(db, "activity_event", { columns: ACTIVITY_EVENT_COLUMNS, ...options });
}

/**
 * The one audit writer of the app, shared by every plugin that records events (the host connector's
 * calls and decisions, and sign-in events). Register it after `tether-db`; its `onClose` hook runs
 * after those of the plugins registered later (Fastify closes in reverse order), so their last rows
 * are in the queue when it flushes.
 */
export const auditPlugin = fp<AuditPluginOptions>(
  async (fastify, options) => {
    const writer =
      options.writer ??
      createAuditWriter(fastify.tetherDb, {
        ...(options.flushIntervalMs !== undefined ? { flushIntervalMs: options.flushIntervalMs } : {}),
        onError: (error) => fastify.log.warn({ err: error }, "audit write failed (will retry)"),
      });
    fastify.decorate("tetherAudit", writer);
    fastify.addHook("onClose", async () => writer.close());
  },
  { name: "tether-audit", fastify: "5.x", dependencies: ["tether-db"] },
);
