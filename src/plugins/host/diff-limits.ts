/**
 * How much of a proposed diff Tether keeps and shows. A device (even a hostile one its owner paired)
 * can plan an 8 MB diff of 4 million lines; stored and rendered whole, every view of /devices built a
 * page of 172 MB. So:
 *
 * - storing: a plan over `MAX_STORED_DIFF_BYTES` or `MAX_STORED_DIFF_LINES` is refused
 *   (`DIFF_TOO_LARGE`, nothing stored): nobody can review it, and apply must compare the whole diff;
 * - showing: a page shows the first `MAX_SHOWN_DIFF_LINES` lines (and at most `MAX_SHOWN_DIFF_BYTES`),
 *   says "diff too large: N lines", and links the full stored diff for download. Such a proposal can
 *   still be approved or rejected; the page says what was not shown.
 */
import { countDiffLines, MAX_PLAN_DIFF_BYTES, MAX_PLAN_DIFF_LINES, planDiffTooLarge } from "../../protocol/plan.js";

export const MAX_STORED_DIFF_BYTES = MAX_PLAN_DIFF_BYTES;
export const MAX_STORED_DIFF_LINES = MAX_PLAN_DIFF_LINES;
export const MAX_SHOWN_DIFF_BYTES = 100 * 1024;
export const MAX_SHOWN_DIFF_LINES = 1_000;

export interface DiffSize {
  bytes: number;
  lines: number;
}

/** Lines of a diff (a final newline does not start another line). */
export const countLines = countDiffLines;

export function sizeOf(diff: string): DiffSize {
  return { bytes: Buffer.byteLength(diff, "utf8"), lines: countLines(diff) };
}

/** The size of a diff too large to store, or null when it may be stored. */
export const tooLargeToStore: (diff: string) => DiffSize | null = planDiffTooLarge;

export interface ShownDiff {
  /** The part to render: whole lines from the start. */
  text: string;
  truncated: boolean;
  total: DiffSize;
}

/** How much of a diff a page may render: lines and bytes. */
export interface ShowLimits {
  lines: number;
  bytes: number;
}
export const SHOWN_DIFF_LIMITS: ShowLimits = { lines: MAX_SHOWN_DIFF_LINES, bytes: MAX_SHOWN_DIFF_BYTES };

/**
 * The beginning of `diff` that a page renders within `limits`, and whether that is all of it. `diff`
 * may be only the start of the stored diff (a page reads no more than it can show): `total` is then
 * the whole one's size, as stored.
 */
export function shownPart(diff: string, limits: ShowLimits = SHOWN_DIFF_LIMITS, total: DiffSize = sizeOf(diff)): ShownDiff {
  if (total.lines <= limits.lines && total.bytes <= limits.bytes) return { text: diff, truncated: false, total };
  // Positions are counted in characters, never more than bytes: the cut stays within `limits.bytes`.
  let end = 0;
  for (let line = 0; line < limits.lines; line++) {
    const next = diff.indexOf("\n", end);
    if (next === -1 || next + 1 > limits.bytes) break;
    end = next + 1;
  }
  return { text: diff.slice(0, end), truncated: true, total };
}

/**
 * Shares one page's render limits among the diffs it shows, so a page of many large proposals renders
 * no more than one diff's worth: each diff gets what it needs, up to an equal share of what the smaller
 * ones left (lines and bytes alike). The shares of `sizes` sum to at most `budget`.
 */
export function sharedLimits(sizes: readonly DiffSize[], budget: ShowLimits = SHOWN_DIFF_LIMITS): ShowLimits[] {
  const fill = (needs: number[], total: number): number[] => {
    const shares = needs.map(() => 0);
    let left = total;
    let waiting = needs.length;
    for (const index of needs.map((_, i) => i).sort((a, b) => needs[a]! - needs[b]!)) {
      const share = Math.min(needs[index]!, Math.floor(left / waiting));
      shares[index] = share;
      left -= share;
      waiting--;
    }
    return shares;
  };
  const lines = fill(
    sizes.map((size) => size.lines),
    budget.lines,
  );
  const bytes = fill(
    sizes.map((size) => size.bytes),
    budget.bytes,
  );
  return sizes.map((_, index) => ({ lines: lines[index]!, bytes: bytes[index]! }));
}
