// Only package entries: what an embedding team would write against tether/host.
import { describeActor } from "../plugins/activity/credential-names.js";
import { shownPart, SHOWN_DIFF_LIMITS, type ShowLimits, type ShownDiff } from "../plugins/host/diff-limits.js";
import type * as proposals from "../plugins/host/proposals.js";
import { diffLines } from "./schema-form.js";

type ProposalSummary = proposals.ProposalSummary;

/** Characters of an Approve or Reject button's hidden label taken from the summary. */
const BUTTON_LABEL_LENGTH = 120;

/** A proposal as a page shows it: its diff (or the start of it), who proposed it, and what became of it. */
export interface ProposalView extends ProposalSummary {
  deviceName: string;
  /** The summary's start, for the hidden part of the Approve and Reject buttons' names. */
  label: string;
  /** The lines a page renders: the start of the diff only, when it is over the shown limits. */
  lines: ReturnType<typeof diffLines>;
  shown: Omit<ShownDiff, "text">;
  /** Cut only because the page's other diffs took their share: on its own it would show whole. */
  sharedCut: boolean;
  /** "API token “ci”", "OAuth client “Claude”", "you, in your browser"… */
  proposedBy: string;
  /** The page of this proposal. */
  href: string;
}

/** A decided proposal as "Recent decisions" lists it. */
export interface DecidedView extends ProposalSummary {
  deviceName: string;
  href: string;
  proposedBy: string;
  /** What happened, in a sentence (see `outcomeSentence`). */
  outcome: string;
  decidedBy: string | null;
  /** When it was decided or ran out. */
  at: Date | null;
}

export const proposalHref = (id: string) => `/devices/proposals/${encodeURIComponent(id)}`;

export const proposedBy = (proposal: ProposalSummary) =>
  proposal.proposer
    ? describeActor(proposal.proposer.actor, proposal.proposer.credential, proposal.proposer.name)
    : "someone (not recorded: proposed before Tether kept this)";

/**
 * A proposal as a page shows it: its diff (or the start of it) cut to `limits` (see diff-limits.ts).
 * The diff's whole size is the stored one, whatever part of it was read.
 */
export function proposalView(proposal: ProposalSummary, diff: string, deviceName: string, limits: ShowLimits = SHOWN_DIFF_LIMITS): ProposalView {
  const { text, ...shown } = shownPart(diff, limits, { bytes: proposal.diffBytes, lines: proposal.diffLines });
  const label = proposal.summary.length > BUTTON_LABEL_LENGTH ? `${proposal.summary.slice(0, BUTTON_LABEL_LENGTH)}…` : proposal.summary;
  const whole = shown.total.lines <= SHOWN_DIFF_LIMITS.lines && shown.total.bytes <= SHOWN_DIFF_LIMITS.bytes;
  return {
    ...proposal,
    deviceName,
    label,
    lines: diffLines(text),
    shown,
    sharedCut: shown.truncated && whole,
    proposedBy: proposedBy(proposal),
    href: proposalHref(proposal.id),
  };
}

export function decidedView(proposal: ProposalSummary & { input?: unknown; diff?: string | null }, deviceName: string): DecidedView {
  return {
    ...proposal,
    deviceName,
    href: proposalHref(proposal.id),
    proposedBy: proposedBy(proposal),
    outcome: outcomeSentence(proposal, deviceName),
    decidedBy: proposal.decidedBy ? describeActor(proposal.decidedBy, null, null) : null,
    at: proposal.finishedAt ?? proposal.decidedAt ?? (proposal.status === "expired" ? proposal.expiresAt : null),
  };
}

const plural = (count: number, word: string) => `${count.toLocaleString("en")} ${word}${count === 1 ? "" : "s"}`;

/** "+3 −1 lines" from a unified diff, or "" when it has none. */
function diffCounts(diff: string | null | undefined): string {
  if (!diff) return "";
  let added = 0;
  let removed = 0;
  for (const line of diff.split("\n")) {
    if (line.startsWith("+") && !line.startsWith("+++")) added++;
    else if (line.startsWith("-") && !line.startsWith("---")) removed++;
  }
  return added + removed === 0 ? "" : ` (+${added} −${removed} ${added + removed === 1 ? "line" : "lines"})`;
}

/**
 * What the change does, in words a confirmation can follow "Applied:" with, from the stored input
 * and plan: "1 replacement in src/math.js", "src/notes.txt written", else the device's own summary.
 */
export function changeWords(proposal: ProposalSummary & { input?: unknown; diff?: string | null }): string {
  const input = (typeof proposal.input === "object" && proposal.input !== null ? proposal.input : {}) as Record<string, unknown>;
  const path = typeof input.path === "string" ? input.path : undefined;
  const counts = diffCounts(proposal.diff);
  // The whole input, or a list's digest of it (`edits` a count: see proposals.recentlyDecided).
  const edits = Array.isArray(input.edits) ? input.edits.length : typeof input.edits === "number" ? input.edits : undefined;
  if (proposal.tool === "edit_file" && path && edits !== undefined) return `${plural(edits, "replacement")} in ${path}${counts}`;
  if (proposal.tool === "write_file" && path) return `${path} written${counts}`;
  if (proposal.tool === "append_file" && path) return `appended to ${path}${counts}`;
  const summary = proposal.summary.trim().replace(/\.$/, "");
  return summary ? `${summary.charAt(0).toLowerCase()}${summary.slice(1)}${counts}` : `${proposal.tool}${path ? ` on ${path}` : ""}${counts}`;
}

/** What became of a proposal, as one sentence: "Applied: 1 replacement in src/math.js.", "Rejected: … Nothing changed." */
export function outcomeSentence(proposal: ProposalSummary & { input?: unknown; diff?: string | null }, deviceName: string): string {
  const what = changeWords(proposal);
  switch (proposal.status) {
    case "applied":
      return `Applied: ${what}, on “${deviceName}”.`;
    case "rejected":
      return `Rejected: ${what}. Nothing on “${deviceName}” changed.`;
    case "failed":
      return `Not applied: ${proposal.error ? `${proposal.error.message} (${proposal.error.code})` : "the device reported a failure"}.`;
    case "expired":
      return `Expired without a decision: ${what}. Nothing on “${deviceName}” changed.`;
    case "applying":
      return `Being applied on “${deviceName}”: ${what}.`;
    default:
      return `Waiting for your decision: ${what}.`;
  }
}
