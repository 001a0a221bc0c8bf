import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";

/** The host audit log: every call and every decision, with who asked and how it ended. */

export type AuditEvent = "pair" | "enroll" | "revoke" | "call" | "propose" | "approve" | "apply" | "reject";
/** Who asked: a browser session, an API token, the chat assistant, an MCP client, or the device itself. */
export type AuditActor = "session" | "token" | "assistant" | "mcp" | "device";

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
}

export async function record(db: Kysely<Database>, entry: AuditEntry): Promise<void> {
  await db
    .insertInto("host_audit")
    .values({
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
    })
    .execute();
}

export async function list(db: Kysely<Database>, userId: string, limit = 100) {
  return db.selectFrom("host_audit").selectAll().where("user_id", "=", userId).orderBy("id", "desc").limit(limit).execute();
}
