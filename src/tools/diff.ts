/** Unified diffs for plans. The diff a plan shows is exactly the change apply makes from the same content. */
import { formatPatch, structuredPatch, type StructuredPatch } from "diff";

/** Myers diff is O(N·D); past this the whole file is shown as replaced, which is still an exact diff. */
const DIFF_TIMEOUT_MS = 2000;
const HEADERS = { includeIndex: false, includeUnderline: false, includeFileHeaders: true };

/**
 * The unified diff turning `oldText` into `newText`. `oldPath` null means the file is created, `newPath` null
 * that it is deleted (shown as /dev/null, as git and patch expect). Identical texts give "".
 */
export function unifiedDiff(oldPath: string | null, newPath: string | null, oldText: string, newText: string): string {
  if (oldText === newText && oldPath !== null && newPath !== null) return "";
  const from = oldPath ?? "/dev/null";
  const to = newPath ?? "/dev/null";
  const patch = structuredPatch(from, to, oldText, newText, undefined, undefined, { context: 3, timeout: DIFF_TIMEOUT_MS });
  return formatPatch(patch ?? wholeFilePatch(from, to, oldText, newText), HEADERS);
}

function splitForPatch(text: string): { lines: string[]; missingFinalNewline: boolean } {
  if (text === "") return { lines: [], missingFinalNewline: false };
  const lines = text.split("\n");
  const missingFinalNewline = !text.endsWith("\n");
  if (!missingFinalNewline) lines.pop();
  return { lines, missingFinalNewline };
}

function wholeFilePatch(from: string, to: string, oldText: string, newText: string): StructuredPatch {
  const before = splitForPatch(oldText);
  const after = splitForPatch(newText);
  const lines: string[] = [];
  for (const line of before.lines) lines.push(`-${line}`);
  if (before.missingFinalNewline) lines.push("\\ No newline at end of file");
  for (const line of after.lines) lines.push(`+${line}`);
  if (after.missingFinalNewline) lines.push("\\ No newline at end of file");
  return {
    oldFileName: from,
    newFileName: to,
    oldHeader: undefined,
    newHeader: undefined,
    hunks: [
      {
        oldStart: before.lines.length ? 1 : 0,
        oldLines: before.lines.length,
        newStart: after.lines.length ? 1 : 0,
        newLines: after.lines.length,
        lines,
      },
    ],
  };
}

/** What a plan shows when either side is not text. */
export function binaryDiff(oldPath: string | null, newPath: string | null): string {
  return `Binary files ${oldPath ?? "/dev/null"} and ${newPath ?? "/dev/null"} differ\n`;
}
