import { randomUUID } from "node:crypto";
import { sql, type Kysely } from "kysely";
import type { Database, HostProposalRow, HostProposalStatus } from "../../db/schema.js";
import { camelColumns } from "../../db/camel-columns.js";
import { sizeOf } from "./diff-limits.js";

/**
 * Mutation proposals. The stored input is the one apply runs: no endpoint can change it. Every state
 * change is one conditional UPDATE … RETURNING, so concurrent decisions cannot both win:
 *
 *   pending ─approve→ applying ─→ applied | failed
 *   pending ─reject→ rejected        pending ─(past expires_at)→ expired
 *   applying ─release→ pending       (the device was offline: nothing was dispatched)
 *
 * A user and each of their devices have at most so many pending proposals (`PendingLimits`), and a
 * decided or expired proposal loses its diff, input and result after the retention (`sweep`).
 */

export const PROPOSAL_TTL_MS = 60 * 60_000;

/** Where a proposal's own page is (served by `devicePages` in tether/web), under the app's base URL. */
export const proposalPath = (proposalId: string): string => `/devices/proposals/${encodeURIComponent(proposalId)}`;

/** How many proposals may wait for a decision at once: for one user, and from one of their devices. */
export interface PendingLimits {
  perUser: number;
  perDevice: number;
}
export const DEFAULT_PENDING_LIMITS: PendingLimits = { perUser: 50, perDevice: 20 };
/** How long a decided or expired proposal keeps its diff, input and result. */
export const DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60_000;

/** A proposal as lists show it: everything but its diff, input and result. */
export interface ProposalSummary {
  id: string;
  deviceId: string;
  tool: string;
  summary: string;
  status: HostProposalStatus;
  createdAt: Date;
  expiresAt: Date;
  decidedAt: Date | null;
  finishedAt: Date | null;
  error: { code: string; message: string } | null;
  /** The diff's size, kept after the diff itself is purged. */
  diffBytes: number;
  diffLines: number;
  /** When the retention cleared the diff, input and result (then null); null while they are kept. */
  purgedAt: Date | null;
  /** Who proposed it; null for a proposal older than this record (migrations/0110) with no audit row to tell. */
  proposer: Proposer | null;
  /** The actor that approved or rejected it (`session`); null while pending, and when it expired. */
  decidedBy: string | null;
}

/** Who proposed a change: the audit log's actor, the credential it used, and that credential's name then. */
export interface Proposer {
  actor: string;
  credential: string | null;
  name: string | null;
}

export interface Proposal extends ProposalSummary {
  input: unknown;
  diff: string | null;
  result: unknown;
}

export type Decision = { ok: true; proposal: Proposal } | { ok: false; reason: "not_found" | "already_decided" | "expired"; status?: HostProposalStatus };

export type Created = { ok: true; proposal: Proposal } | { ok: false; over: "user" | "device"; waiting: number; limit: number };

/**
 * Stores a pending proposal, unless the user or the device already has as many waiting as `limits`
 * allow. The count and the insert run under a per-user transaction lock, so proposals made at once (on
 * one replica or several) cannot together go past the limit.
 */
export async function create(
  db: Kysely<Database>,
  input: { userId: string; deviceId: string; tool: string; input: unknown; diff: string; summary: string; ttlMs?: number; proposer?: Proposer },
  limits: PendingLimits = DEFAULT_PENDING_LIMITS,
): Promise<Created> {
  const size = sizeOf(input.diff);
  return db.transaction().execute(async (trx): Promise<Created> => {
    await sql`select pg_advisory_xact_lock(hashtextextended(${`tether:proposals:${input.userId}`}, 0))`.execute(trx);
    const waiting = await countPending(trx, input.userId, input.deviceId);
    if (waiting.device >= limits.perDevice) return { ok: false, over: "device", waiting: waiting.device, limit: limits.perDevice };
    if (waiting.user >= limits.perUser) return { ok: false, over: "user", waiting: waiting.user, limit: limits.perUser };
    const row = await trx
      .insertInto("host_proposal")
      .values({
        id: randomUUID(),
        user_id: input.userId,
        device_id: input.deviceId,
        tool: input.tool,
        input: JSON.stringify(input.input),
        diff: input.diff,
        diff_bytes: size.bytes,
        diff_lines: size.lines,
        summary: input.summary,
        proposer_actor: input.proposer?.actor ?? null,
        proposer_credential: input.proposer?.credential ?? null,
        proposer_name: input.proposer?.name ?? null,
        expires_at: new Date(Date.now() + (input.ttlMs ?? PROPOSAL_TTL_MS)),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { ok: true, proposal: toProposal(row) };
  });
}

/**
 * The proposals waiting for the user's decision (not expired, from devices not revoked): all of them,
 * and those from `deviceId`. The page's total and the limits count the same rows.
 */
export async function countPending(db: Kysely<Database>, userId: string, deviceId?: string): Promise<{ user: number; device: number }> {
  const row = await db
    .selectFrom("host_proposal as p")
    .innerJoin("host_device as d", "d.id", "p.device_id")
    .select((eb) => [
      eb.fn.countAll<string | number>().as("user"),
      eb.fn
        .countAll<string | number>()
        .filterWhere("p.device_id", "=", deviceId ?? "")
        .as("device"),
    ])
    .where("p.user_id", "=", userId)
    .where("p.status", "=", "pending")
    .where("p.expires_at", ">", new Date())
    .where("d.revoked_at", "is", null)
    .executeTakeFirstOrThrow();
  return { user: Number(row.user), device: Number(row.device) };
}

/** The owner's pending proposals on the given devices (a limited credential's count). */
async function countPendingOn(db: Kysely<Database>, userId: string, deviceIds: readonly string[]): Promise<number> {
  const row = await db
    .selectFrom("host_proposal as p")
    .innerJoin("host_device as d", "d.id", "p.device_id")
    .select((eb) => eb.fn.countAll<string | number>().as("count"))
    .where("p.user_id", "=", userId)
    .where("p.status", "=", "pending")
    .where("p.expires_at", ">", new Date())
    .where("d.revoked_at", "is", null)
    .where("p.device_id", "in", [...deviceIds])
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** pending → applying, exactly once; the caller then dispatches the stored input in apply mode. */
export async function approve(db: Kysely<Database>, userId: string, proposalId: string, by = "session"): Promise<Decision> {
  return decide(db, userId, proposalId, "applying", by);
}

/** pending → rejected, exactly once. */
export async function reject(db: Kysely<Database>, userId: string, proposalId: string, by = "session"): Promise<Decision> {
  return decide(db, userId, proposalId, "rejected", by);
}

async function decide(db: Kysely<Database>, userId: string, proposalId: string, next: "applying" | "rejected", by: string): Promise<Decision> {
  const now = new Date();
  const row = await db
    .updateTable("host_proposal")
    .set({ status: next, decided_at: now, decided_by: by, ...(next === "rejected" ? { finished_at: now } : {}) })
    .where("id", "=", proposalId)
    .where("user_id", "=", userId)
    .where("status", "=", "pending")
    .where("expires_at", ">", now)
    .where("purged_at", "is", null)
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
    .set({ status: "pending", decided_at: null, decided_by: null })
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

export interface PendingPage<P extends ProposalSummary = ProposalSummary> {
  proposals: P[];
  /** Pass as `cursor` for the next page; null on the last. */
  nextCursor: string | null;
  /** How many are waiting in all (every page). */
  total: number;
}

/** A pending proposal with the start of its diff: what a page renders, never the whole of a large one. */
export interface PendingWithDiff extends ProposalSummary {
  /** The diff's first `diffHeadChars` characters. */
  diffHead: string;
}

const SUMMARY_COLUMNS = [
  "p.id",
  "p.device_id",
  "p.tool",
  "p.summary",
  "p.status",
  "p.created_at",
  "p.expires_at",
  "p.decided_at",
  "p.finished_at",
  "p.error_code",
  "p.error_message",
  "p.diff_bytes",
  "p.diff_lines",
  "p.purged_at",
  "p.proposer_actor",
  "p.proposer_credential",
  "p.proposer_name",
  "p.decided_by",
] as const;

/**
 * One page of the owner's pending proposals (of devices not revoked), oldest first, without their
 * diffs, or with the first `diffHeadChars` characters of each. `cursor` is the `nextCursor` of the page
 * before; undefined when it names no proposal of this user.
 */
export async function pendingPage(
  db: Kysely<Database>,
  userId: string,
  page: { limit: number; cursor?: string | undefined; deviceIds?: readonly string[] | undefined },
): Promise<PendingPage | undefined>;
export async function pendingPage(
  db: Kysely<Database>,
  userId: string,
  page: { limit: number; cursor?: string | undefined; diffHeadChars: number },
): Promise<PendingPage<PendingWithDiff> | undefined>;
export async function pendingPage(
  db: Kysely<Database>,
  userId: string,
  page: { limit: number; cursor?: string | undefined; diffHeadChars?: number; deviceIds?: readonly string[] | undefined },
): Promise<PendingPage<ProposalSummary | PendingWithDiff> | undefined> {
  const { cursor, limit, diffHeadChars, deviceIds } = page;
  // A credential limited to chosen devices (credential-grants.ts) sees only their proposals; none chosen is none.
  if (deviceIds?.length === 0) return { proposals: [], nextCursor: null, total: 0 };
  if (cursor !== undefined) {
    const known = await db.selectFrom("host_proposal").select("id").where("id", "=", cursor).where("user_id", "=", userId).executeTakeFirst();
    if (!known) return undefined;
  }
  let query = db
    .selectFrom("host_proposal as p")
    .innerJoin("host_device as d", "d.id", "p.device_id")
    .select(SUMMARY_COLUMNS)
    .where("p.user_id", "=", userId)
    .where("p.status", "=", "pending")
    .where("p.expires_at", ">", new Date())
    .where("d.revoked_at", "is", null)
    .orderBy("p.created_at", "asc")
    .orderBy("p.id", "asc")
    .limit(limit + 1);
  if (deviceIds) query = query.where("p.device_id", "in", [...deviceIds]);
  // Compared in the database: a JavaScript Date would drop created_at's microseconds.
  if (cursor !== undefined) query = query.where(sql<boolean>`(p.created_at, p.id) > (select c.created_at, c.id from host_proposal c where c.id = ${cursor})`);
  const rows =
    diffHeadChars === undefined
      ? await query.execute()
      : await query.select(sql<string>`coalesce(substr(p.diff, 1, ${diffHeadChars}), '')`.as("diff_head")).execute();
  const total = deviceIds ? await countPendingOn(db, userId, deviceIds) : (await countPending(db, userId)).user;
  const shown = rows.slice(0, limit);
  return {
    proposals: shown.map((row) => {
      const summary = toSummary(row);
      return "diff_head" in row ? { ...summary, diffHead: String(row.diff_head) } : summary;
    }),
    nextCursor: rows.length > limit ? shown[shown.length - 1]!.id : null,
    total,
  };
}

/** A decided proposal as lists show it: what its input says of where and how much, not the input itself (it may be large). */
export interface DecidedSummary extends ProposalSummary {
  input: { path?: string; edits?: number };
}

/**
 * The owner's most recent decided, failed and expired proposals (of devices not revoked), newest
 * first, without their diffs: what "Recent decisions" lists.
 */
export async function recentlyDecided(db: Kysely<Database>, userId: string, limit: number): Promise<DecidedSummary[]> {
  const rows = await db
    .selectFrom("host_proposal as p")
    .innerJoin("host_device as d", "d.id", "p.device_id")
    .select(SUMMARY_COLUMNS)
    .select(sql<string | null>`case when jsonb_typeof(p.input->'path') = 'string' then left(p.input->>'path', 4096) end`.as("input_path"))
    .select(sql<number | null>`case when jsonb_typeof(p.input->'edits') = 'array' then jsonb_array_length(p.input->'edits') end`.as("input_edits"))
    .where("p.user_id", "=", userId)
    .where("p.status", "<>", "pending")
    .where("d.revoked_at", "is", null)
    .orderBy(sql`coalesce(p.finished_at, p.decided_at, p.expires_at)`, "desc")
    .orderBy("p.id", "desc")
    .limit(limit)
    .execute();
  return rows.map((row) => ({
    ...toSummary(row),
    input: { ...(row.input_path !== null ? { path: row.input_path } : {}), ...(row.input_edits !== null ? { edits: Number(row.input_edits) } : {}) },
  }));
}

export { sweep, type SweepOptions, type SweepOutcome } from "./proposal-sweep.js";

type SummaryRow = Pick<
  HostProposalRow,
  | "id"
  | "device_id"
  | "tool"
  | "summary"
  | "status"
  | "created_at"
  | "expires_at"
  | "decided_at"
  | "finished_at"
  | "error_code"
  | "error_message"
  | "diff_bytes"
  | "diff_lines"
  | "purged_at"
  | "proposer_actor"
  | "proposer_credential"
  | "proposer_name"
  | "decided_by"
>;

function toSummary(row: SummaryRow): ProposalSummary {
  const columns = ["id", "device_id", "tool", "summary", "status", "created_at", "expires_at", "decided_at", "finished_at", "purged_at"] as const;
  return {
    ...camelColumns(row, columns),
    error: row.error_code ? { code: row.error_code, message: row.error_message ?? "" } : null,
    diffBytes: row.diff_bytes ?? 0,
    diffLines: row.diff_lines ?? 0,
    proposer: row.proposer_actor ? { actor: row.proposer_actor, credential: row.proposer_credential, name: row.proposer_name } : null,
    decidedBy: row.decided_by,
  };
}

function toProposal(row: HostProposalRow): Proposal {
  return { ...toSummary(row), input: row.input, diff: row.diff, result: row.result };
}
