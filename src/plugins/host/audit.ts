import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import type { BatchWriter } from "../../db/batch-writer.js";
import type { Database } from "../../db/schema.js";
import type { AuditRow } from "../activity/audit-plugin.js";

/** The host audit log: every call and every decision, with who asked and how it ended. */

export type AuditEvent = "pair" | "enroll" | "revoke" | "call" | "propose" | "approve" | "apply" | "reject" | "blob_make" | "blob_fetch";
/** Who asked: a browser session, an API token, the chat assistant, an MCP client, the device itself, or whoever held a signed blob URL. */
export type AuditActor = "session" | "token" | "assistant" | "mcp" | "device" | "url";

export interface AuditEntry {
  userId: string;
  event: AuditEvent;
  actor: AuditActor;
  /** Which credential, when the actor holds one (`token:<id>`, `oauth:<client id>`). */
  credential?: string | null;
  deviceId?: string | null;
  proposalId?: string | null;
  tool?: string | null;
  mode?: string | null;
  /** The input is logged as a digest: file contents do not belong in a log. */
  input?: unknown;
  outcome: "ok" | "error";
  errorCode?: string | null;
  durationMs?: number | null;
  /** Non-secret facts (a blob's id, file, size and digest). */
  detail?: Record<string, unknown>;
}

/** Queues the entry on the audit writer: the request never waits for the audit INSERT. */
export function record(writer: BatchWriter<AuditRow>, entry: AuditEntry): void {
  writer.write({
    user_id: entry.userId,
    device_id: entry.deviceId ?? null,
    proposal_id: entry.proposalId ?? null,
    event: entry.event,
    actor: entry.actor,
    tool: entry.tool ?? null,
    mode: entry.mode ?? null,
    input_digest: entry.input === undefined ? null : createHash("sha256").update(JSON.stringify(entry.input)).digest("hex"),
    outcome: entry.outcome,
    error_code: entry.errorCode ?? null,
    duration_ms: entry.durationMs === undefined || entry.durationMs === null ? null : Math.round(entry.durationMs),
    credential: entry.credential ?? null,
    ...(entry.detail ? { detail: JSON.stringify(entry.detail) } : {}),
  });
}

export async function list(db: Kysely<Database>, userId: string, limit = 100) {
  return db.selectFrom("activity_event").selectAll().where("user_id", "=", userId).orderBy("id", "desc").limit(limit).execute();
}
