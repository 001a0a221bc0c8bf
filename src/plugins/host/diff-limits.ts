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
export const MAX_STORED_DIFF_BYTES = 1024 * 1024;
export const MAX_STORED_DIFF_LINES = 20_000;
export const MAX_SHOWN_DIFF_BYTES = 100 * 1024;
export const MAX_SHOWN_DIFF_LINES = 1_000;

export interface DiffSize {
  bytes: number;
  lines: number;
}

/** Lines of a diff (a final newline does not start another line). */
export function countLines(diff: string): number {
  if (diff === "") return 0;
  let lines = 1;
  for (let at = diff.indexOf("\n"); at !== -1 && at < diff.length - 1; at = diff.indexOf("\n", at + 1)) lines++;
  return lines;
}

export function sizeOf(diff: string): DiffSize {
  return { bytes: Buffer.byteLength(diff, "utf8"), lines: countLines(diff) };
}

/** The size of a diff too large to store, or null when it may be stored. */
export function tooLargeToStore(diff: string): DiffSize | null {
  // The byte length bounds the line count's cost, so it is checked first.
  const bytes = Buffer.byteLength(diff, "utf8");
  if (bytes > MAX_STORED_DIFF_BYTES) return { bytes, lines: countLines(diff) };
  const lines = countLines(diff);
  return lines > MAX_STORED_DIFF_LINES ? { bytes, lines } : null;
}

export interface ShownDiff {
  /** The part to render: whole lines from the start. */
  text: string;
  truncated: boolean;
  total: DiffSize;
}

/** The beginning of `diff` that a page renders, and whether that is all of it. */
export function shownPart(diff: string): ShownDiff {
  const total = sizeOf(diff);
  if (total.lines <= MAX_SHOWN_DIFF_LINES && total.bytes <= MAX_SHOWN_DIFF_BYTES) return { text: diff, truncated: false, total };
  let end = 0;
  for (let line = 0; line < MAX_SHOWN_DIFF_LINES; line++) {
    const next = diff.indexOf("\n", end);
    if (next === -1 || next + 1 > MAX_SHOWN_DIFF_BYTES) break;
    end = next + 1;
  }
  return { text: diff.slice(0, end), truncated: true, total };
}
