import type { Kysely } from "kysely";
import type { BatchWriter } from "../../db/batch-writer.js";
import { outsideFairShare } from "../../http/fair-share-context.js";
import type { Database } from "../../db/schema.js";
import { planProblem } from "../../protocol/index.js";
import type { AuditRow } from "../activity/audit-plugin.js";
import { credentialNames } from "../activity/credential-names.js";
import * as audit from "./audit.js";
import type { AuditEntry } from "./audit.js";
import { MAX_STORED_DIFF_BYTES, MAX_STORED_DIFF_LINES, tooLargeToStore } from "./diff-limits.js";
import type { DeviceIdentity } from "./devices.js";
import { DeviceCallError, type CallOptions, type Dispatcher } from "./dispatcher.js";
import { HostError, refusal } from "./errors.js";
import * as proposals from "./proposals.js";
import type { PendingLimits, PendingPage, PendingWithDiff, Proposal, ProposalSummary } from "./proposals.js";

/** Pages of pending proposals hold at most this many; a caller may ask for fewer. */
export const MAX_PROPOSAL_PAGE_SIZE = 100;
export const DEFAULT_PROPOSAL_PAGE_SIZE = 20;

export interface ProposalCaller {
  userId: string;
  actor: AuditEntry["actor"];
}

export interface ProposalServiceOptions {
  db: Kysely<Database>;
  dispatcher: Dispatcher;
  audit: BatchWriter<AuditRow>;
  notify: (userId: string, topic: "proposals") => void;
  applyTimeoutMs: number;
  proposalTtlMs?: number | undefined;
  pendingLimits: PendingLimits;
  retentionMs: number;
  codeOf: (error: unknown) => string;
  /** Resolves the blobs a stored input names, with fresh URLs, at apply. */
  blobsFor?: BlobsFor;
}

/** The part of an audit entry a mutate call already knows when its plan comes back. */
type ProposeEntry = Omit<AuditEntry, "event" | "outcome">;

/**
 * Proposals' use cases for the host service (service.ts): checking room before a device plans,
 * storing a plan within the protocol's bounds and the pending limits, deciding, listing, and the
 * retention sweep.
 */
export function createProposalService(options: ProposalServiceOptions) {
  const { db, audit: auditLog, notify, pendingLimits } = options;

  // Arrow functions: the host service hands these on as its own methods, unbound.
  const service = {
    /** TOO_MANY_PENDING before the device is asked to plan, when there is no room for one more. */
    checkRoom: async (device: DeviceIdentity): Promise<void> => {
      const waiting = await proposals.countPending(db, device.userId, device.id);
      if (waiting.device >= pendingLimits.perDevice) throw tooMany({ over: "device", waiting: waiting.device, limit: pendingLimits.perDevice }, device);
      if (waiting.user >= pendingLimits.perUser) throw tooMany({ over: "user", waiting: waiting.user, limit: pendingLimits.perUser }, device);
    },

    /** Stores the device's plan as a pending proposal, or refuses it (audited either way). */
    store: (device: DeviceIdentity, entry: ProposeEntry, plan: unknown, durationMs: number): Promise<Proposal> =>
      storePlan(options, device, entry, plan, durationMs),

    /** Approves and applies: the device runs the stored input in apply mode (audited as approve, then apply). */
    approve: (caller: ProposalCaller, proposalId: string): Promise<{ proposal: Proposal; result: unknown }> => approveAndApply(options, caller, proposalId),

    reject: async (caller: ProposalCaller, proposalId: string): Promise<Proposal> => {
      const decision = await proposals.reject(db, caller.userId, proposalId, caller.actor);
      if (!decision.ok) throw refusal(decision);
      const { proposal } = decision;
      audit.record(auditLog, {
        userId: caller.userId,
        deviceId: proposal.deviceId,
        proposalId,
        actor: caller.actor,
        tool: proposal.tool,
        event: "reject",
        outcome: "ok",
      });
      notify(caller.userId, "proposals");
      return proposal;
    },

    pendingProposals: async (
      userId: string,
      page: { cursor?: string | undefined; limit?: number | undefined } = {},
      deviceIds?: readonly string[],
    ): Promise<PendingPage<ProposalSummary>> => {
      const found = await proposals.pendingPage(db, userId, { cursor: page.cursor, limit: pageSize(page.limit), deviceIds });
      if (!found) throw badCursor();
      return found;
    },

    pendingWithDiffs: async (
      userId: string,
      page: { cursor?: string | undefined; limit: number; diffHeadChars: number },
    ): Promise<PendingPage<PendingWithDiff>> => {
      const found = await proposals.pendingPage(db, userId, { cursor: page.cursor, limit: pageSize(page.limit), diffHeadChars: page.diffHeadChars });
      if (!found) throw badCursor();
      return found;
    },

    proposal: async (userId: string, proposalId: string): Promise<Proposal> => {
      const found = await proposals.get(db, userId, proposalId);
      if (!found) throw new HostError("PROPOSAL_NOT_FOUND", "You have no proposal with this id");
      return found;
    },

    /** The owner's latest decided, failed and expired proposals, newest first (at most `limit`, up to a page). */
    recentlyDecided: async (userId: string, limit = DEFAULT_PROPOSAL_PAGE_SIZE): Promise<proposals.DecidedSummary[]> =>
      proposals.recentlyDecided(db, userId, pageSize(limit)),

    sweepProposals: async (): Promise<proposals.SweepOutcome> => {
      const outcome = await proposals.sweep(db, { retentionMs: options.retentionMs });
      for (const userId of outcome.expiredFor) notify(userId, "proposals");
      return outcome;
    },
  };
  return service;
}

/** The refusal when the device or the owner has as many proposals waiting as allowed. */
const tooMany = (outcome: { over: "user" | "device"; waiting: number; limit: number }, device: DeviceIdentity) =>
  new HostError(
    "TOO_MANY_PENDING",
    outcome.over === "device"
      ? `${outcome.waiting} proposals from “${device.name}” are already waiting for your decision (the limit is ${outcome.limit} per device). ` +
          "Approve or reject some on /devices, or let them expire, then propose again."
      : `${outcome.waiting} proposals are already waiting for your decision (the limit is ${outcome.limit}). ` +
          "Approve or reject some on /devices, or let them expire, then propose again.",
  );

/** Stores the device's plan as a pending proposal, or refuses it (audited either way). */
async function storePlan(options: ProposalServiceOptions, device: DeviceIdentity, entry: ProposeEntry, plan: unknown, durationMs: number): Promise<Proposal> {
  const { db, audit: auditLog, notify, pendingLimits } = options;
  const tool = entry.tool ?? "";
  const refuse = (code: string, error: HostError): never => {
    audit.record(auditLog, { ...entry, event: "propose", outcome: "error", errorCode: code, durationMs });
    throw error;
  };
  const planned = plan as { diff?: unknown; summary?: unknown } | null;
  if (typeof planned?.diff !== "string") {
    return refuse("NOT_A_PROPOSAL", new HostError("NOT_A_PROPOSAL", `The device's plan for "${tool}" returned no diff`));
  }
  const oversized = tooLargeToStore(planned.diff);
  if (oversized) {
    return refuse(
      "DIFF_TOO_LARGE",
      new HostError(
        "DIFF_TOO_LARGE",
        `The device's plan for "${tool}" is too large to review: ${oversized.lines} lines, ${Math.ceil(oversized.bytes / 1024)} KB ` +
          `(the limit is ${MAX_STORED_DIFF_LINES} lines and ${MAX_STORED_DIFF_BYTES / 1024} KB). Nothing was stored; split it into smaller changes.`,
      ),
    );
  }
  const problem = planProblem(planned);
  if (problem) {
    return refuse(
      "PLAN_INVALID",
      new HostError("PLAN_INVALID", `The device's plan for "${tool}" is outside the protocol's bounds: ${problem}. Nothing was stored.`),
    );
  }
  // The credential's name as it is now: the proposal keeps it, whatever becomes of the credential.
  const credential = entry.credential ?? null;
  const name = credential ? ((await credentialNames(db, [credential])).get(credential) ?? null) : null;
  const created = await proposals.create(
    db,
    {
      userId: device.userId,
      deviceId: device.id,
      tool,
      input: entry.input,
      diff: planned.diff,
      summary: typeof planned.summary === "string" ? planned.summary : "",
      proposer: { actor: entry.actor, credential, name },
      ...(options.proposalTtlMs !== undefined ? { ttlMs: options.proposalTtlMs } : {}),
    },
    pendingLimits,
  );
  if (!created.ok) return refuse("TOO_MANY_PENDING", tooMany(created, device));
  audit.record(auditLog, { ...entry, event: "propose", proposalId: created.proposal.id, outcome: "ok", durationMs });
  notify(device.userId, "proposals");
  return created.proposal;
}

/**
 * Approves (atomically: one decision wins) and applies the stored input in apply mode; a device that was
 * offline leaves the proposal waiting for another approval, any other failure is recorded on it.
 */
async function approveAndApply(options: ProposalServiceOptions, caller: ProposalCaller, proposalId: string): Promise<{ proposal: Proposal; result: unknown }> {
  const { db, dispatcher, audit: auditLog, notify } = options;
  const decision = await proposals.approve(db, caller.userId, proposalId, caller.actor);
  if (!decision.ok) throw refusal(decision);
  const { proposal } = decision;
  const entry = { userId: caller.userId, deviceId: proposal.deviceId, proposalId, actor: caller.actor, tool: proposal.tool };
  audit.record(auditLog, { ...entry, event: "approve", outcome: "ok" });
  notify(caller.userId, "proposals");
  const started = performance.now();
  try {
    // The stored input, exactly as proposed: the approving request carries only the id. A pending
    // proposal is never purged, so its diff is there.
    const expectedPlan = { diff: proposal.diff ?? "", summary: proposal.summary };
    // Blobs the input names get fresh URLs now (the plan's have expired by an approval hours later).
    const blobs = await blobsOption(options.blobsFor, caller.userId, proposal.input);
    const result = await outsideFairShare(() =>
      dispatcher.call(proposal.deviceId, proposal.tool, proposal.input, { mode: "apply", timeoutMs: options.applyTimeoutMs, expectedPlan, ...blobs }),
    );
    const finished = await proposals.finish(db, proposalId, { ok: true, result });
    audit.record(auditLog, { ...entry, event: "apply", mode: "apply", input: proposal.input, outcome: "ok", durationMs: performance.now() - started });
    return { proposal: finished ?? proposal, result };
  } catch (error) {
    if (error instanceof DeviceCallError && error.code === "DEVICE_OFFLINE") {
      // Nothing reached the device: the proposal waits for another approval.
      await proposals.release(db, proposalId);
    } else {
      const message = error instanceof Error ? error.message : String(error);
      await proposals.finish(db, proposalId, { ok: false, code: options.codeOf(error), message });
    }
    audit.record(auditLog, {
      ...entry,
      event: "apply",
      mode: "apply",
      input: proposal.input,
      outcome: "error",
      errorCode: options.codeOf(error),
      durationMs: performance.now() - started,
    });
    throw error;
  } finally {
    notify(caller.userId, "proposals");
  }
}

const pageSize = (limit: number | undefined) => Math.min(Math.max(Math.trunc(limit ?? DEFAULT_PROPOSAL_PAGE_SIZE), 1), MAX_PROPOSAL_PAGE_SIZE);

const badCursor = () => new HostError("INVALID_CURSOR", "This cursor is not one a page of your proposals gave; start again without a cursor");

/** Resolves the blobs an input names (write_file's `blob`) into the call's `blobs` option. */
export type BlobsFor = (userId: string, input: unknown) => Promise<CallOptions["blobs"]>;

export async function blobsOption(blobsFor: BlobsFor | undefined, userId: string, input: unknown): Promise<{ blobs?: CallOptions["blobs"] }> {
  const blobs = blobsFor ? await blobsFor(userId, input) : undefined;
  return blobs ? { blobs } : {};
}
