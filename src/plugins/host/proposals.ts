import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import type { Database, HostProposalRow, HostProposalStatus } from "../../db/schema.js";
import { camelColumns } from "../../db/camel-columns.js";

/**
 * Mutation proposals. The stored input is the one apply runs: no endpoint can change it. Every state
 * change is one conditional UPDATE … RETURNING, so concurrent decisions cannot both win:
 *
 *   pending ─approve→ applying ─→ applied | failed
 *   pending ─reject→ rejected        pending ─(past expires_at)→ expired
 *   applying ─release→ pending       (the device was offline: nothing was dispatched)
 */

export const PROPOSAL_TTL_MS = 60 * 60_000;

export interface Proposal {
  id: string;
  deviceId: string;
  tool: string;
  input: unknown;
  diff: string;
  summary: string;
  status: HostProposalStatus;
  createdAt: Date;
  expiresAt: Date;
  decidedAt: Date | null;
  finishedAt: Date | null;
  result: unknown;
  error: { code: string; message: string } | null;
}

export type Decision = { ok: true; proposal: Proposal } | { ok: false; reason: "not_found" | "already_decided" | "expired"; status?: HostProposalStatus };

export async function create(
  db: Kysely<Database>,
  input: { userId: string; deviceId: string; tool: string; input: unknown; diff: string; summary: string; ttlMs?: number },
): Promise<Proposal> {
  const row = await db
    .insertInto("host_proposal")
    .values({
      id: randomUUID(),
      user_id: input.userId,
      device_id: input.deviceId,
      tool: input.tool,
      input: JSON.stringify(input.input),
      diff: input.diff,
      summary: input.summary,
      expires_at: new Date(Date.now() + (input.ttlMs ?? PROPOSAL_TTL_MS)),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return toProposal(row);
}

/** pending → applying, exactly once; the caller then dispatches the stored input in apply mode. */
export async function approve(db: Kysely<Database>, userId: string, proposalId: string): Promise<Decision> {
  return decide(db, userId, proposalId, "applying");
}

/** pending → rejected, exactly once. */
export async function reject(db: Kysely<Database>, userId: string, proposalId: string): Promise<Decision> {
  return decide(db, userId, proposalId, "rejected");
}

async function decide(db: Kysely<Database>, userId: string, proposalId: string, next: "applying" | "rejected"): Promise<Decision> {
  const now = new Date();
  const row = await db
    .updateTable("host_proposal")
    .set({ status: next, decided_at: now, ...(next === "rejected" ? { finished_at: now } : {}) })
    .where("id", "=", proposalId)
    .where("user_id", "=", userId)
    .where("status", "=", "pending")
    .where("expires_at", ">", now)
    .returningAll()
    .executeTakeFirst();
  if (row) return { ok: true, proposal: toProposal(row) };
  const current = await db
    .selectFrom("host_proposal")
    .select(["status", "expires_at"])
    .where("id", "=", proposalId)
    .where("user_id", "=", userId)
    .executeTakeFirst();
  if (!current) return { ok: false, reason: "not_found" };
  if (current.status === "pending" || current.status === "expired") {
    await expireStale(db, userId);
    return { ok: false, reason: "expired", status: "expired" };
  }
  return { ok: false, reason: "already_decided", status: current.status };
}

/** applying → applied | failed, with the device's result or error. */
export async function finish(
  db: Kysely<Database>,
  proposalId: string,
  outcome: { ok: true; result: unknown } | { ok: false; code: string; message: string },
): Promise<Proposal | undefined> {
  const row = await db
    .updateTable("host_proposal")
    .set(
      outcome.ok
        ? { status: "applied", finished_at: new Date(), result: JSON.stringify(outcome.result ?? null) }
        : { status: "failed", finished_at: new Date(), error_code: outcome.code, error_message: outcome.message },
    )
    .where("id", "=", proposalId)
    .where("status", "=", "applying")
    .returningAll()
    .executeTakeFirst();
  return row ? toProposal(row) : undefined;
}

/** applying → pending: nothing reached the device (it was offline), so the decision is undone. */
export async function release(db: Kysely<Database>, proposalId: string): Promise<void> {
  await db
    .updateTable("host_proposal")
    .set({ status: "pending", decided_at: null })
    .where("id", "=", proposalId)
    .where("status", "=", "applying")
    .execute();
}

/** Marks the owner's pending proposals past their time as expired. */
export async function expireStale(db: Kysely<Database>, userId: string): Promise<void> {
  await db
    .updateTable("host_proposal")
    .set({ status: "expired", finished_at: new Date() })
    .where("user_id", "=", userId)
    .where("status", "=", "pending")
    .where("expires_at", "<=", new Date())
    .execute();
}

export async function get(db: Kysely<Database>, userId: string, proposalId: string): Promise<Proposal | undefined> {
  const row = await db.selectFrom("host_proposal").selectAll().where("id", "=", proposalId).where("user_id", "=", userId).executeTakeFirst();
  return row ? toProposal(row) : undefined;
}

/** The owner's pending proposals (of devices not revoked), oldest first. */
export async function listPending(db: Kysely<Database>, userId: string): Promise<Proposal[]> {
  await expireStale(db, userId);
  const rows = await db
    .selectFrom("host_proposal as p")
    .innerJoin("host_device as d", "d.id", "p.device_id")
    .selectAll("p")
    .where("p.user_id", "=", userId)
    .where("p.status", "=", "pending")
    .where("d.revoked_at", "is", null)
    .orderBy("p.created_at", "asc")
    .execute();
  return rows.map(toProposal);
}

function toProposal(row: HostProposalRow): Proposal {
  const columns = ["id", "device_id", "tool", "input", "diff", "summary", "status", "created_at", "expires_at", "decided_at", "finished_at", "result"] as const;
  return { ...camelColumns(row, columns), error: row.error_code ? { code: row.error_code, message: row.error_message ?? "" } : null };
}
