/**
 * A mutate tool's plan, as a device returns it in `plan` mode (`POST /api/host/result`): the exact diff,
 * a summary for the owner, and the details the built-in tools add (paths, entries, counts). The server
 * keeps the diff and the summary, renders them on `/devices` and sends them back in `apply` mode; a
 * device, even a hostile one, must not make either (or anything else it says) arbitrarily large.
 *
 * Both sides check a plan against these bounds: the tools library before a plan leaves the device
 * (`PLAN_INVALID`, a tool error), the server before it stores anything (`PLAN_INVALID`, 502: the
 * device broke the protocol). The diff has limits of its own (`MAX_PLAN_DIFF_*`, `DIFF_TOO_LARGE`): a
 * diff too large to review is a refusal of the change, not a broken device.
 */
import { Type, type Static } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";

/** A diff over this many bytes (UTF-8) is refused: nobody can review it, and apply compares it whole. */
export const MAX_PLAN_DIFF_BYTES = 1024 * 1024;
/** …or over this many lines. */
export const MAX_PLAN_DIFF_LINES = 20_000;
/**
 * Characters of a plan's summary: room for two paths of `MAX_PLAN_PATH_LENGTH` and the words around
 * them (a move or copy names both ends). The tools library shortens a longer summary in its middle
 * (`boundSummary`), the same way at plan and at apply, so an approved plan still compares equal.
 */
export const MAX_PLAN_SUMMARY_LENGTH = 10_000;
/** Characters of one path in a plan (the tools' own path limit). */
export const MAX_PLAN_PATH_LENGTH = 4096;
/** Items of a list in a plan (entries a copy or delete lists, folders it creates). */
export const MAX_PLAN_ENTRIES = 1000;

const PlanPath = Type.String({ maxLength: MAX_PLAN_PATH_LENGTH });
const Word = Type.String({ maxLength: 64 });
/** A count or a size: a whole number, not negative. */
const Count = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
const Entry = Type.Object({ path: PlanPath, type: Word, size: Type.Optional(Count) });
const Entries = Type.Array(Entry, { maxItems: MAX_PLAN_ENTRIES });

/**
 * The fields of a plan the protocol names, each bounded. A tool may add others: the server neither
 * stores nor shows them (the result route's size limit is their only bound), so they cannot grow a page
 * or a table.
 */
export const PlanSchema = Type.Object(
  {
    /** Bounded by `MAX_PLAN_DIFF_BYTES` and `MAX_PLAN_DIFF_LINES`, checked apart (`planDiffTooLarge`). */
    diff: Type.String(),
    summary: Type.Optional(Type.String({ maxLength: MAX_PLAN_SUMMARY_LENGTH })),
    path: Type.Optional(PlanPath),
    from: Type.Optional(PlanPath),
    to: Type.Optional(PlanPath),
    type: Type.Optional(Word),
    createsDirectories: Type.Optional(Type.Array(PlanPath, { maxItems: MAX_PLAN_ENTRIES })),
    removes: Type.Optional(Entries),
    copies: Type.Optional(Entries),
    totals: Type.Optional(Type.Record(Type.String({ maxLength: 64 }), Count, { maxProperties: 16 })),
    bytes: Type.Optional(Count),
    bytesAppended: Type.Optional(Count),
    limit: Type.Optional(Count),
    omitted: Type.Optional(Count),
    sha256: Type.Optional(Word),
    sha256After: Type.Optional(Word),
    lineEndings: Type.Optional(Word),
  },
  { additionalProperties: true },
);
export type Plan = Static<typeof PlanSchema>;

const planCheck = TypeCompiler.Compile(PlanSchema);

/**
 * What is wrong with `plan` as a plan, in words naming the field and its bound, or undefined when it is
 * within the protocol's bounds. The diff's size is not judged here (`planDiffTooLarge`).
 */
export function planProblem(plan: unknown): string | undefined {
  if (planCheck.Check(plan)) return undefined;
  const first = planCheck.Errors(plan).First();
  if (!first) return "it is not a plan";
  const field = first.path === "" ? "the plan" : `"${first.path.slice(1).replaceAll("/", ".")}"`;
  const { value } = first;
  const size = typeof value === "string" ? ` (${value.length} characters)` : Array.isArray(value) ? ` (${value.length} items)` : "";
  return `${field}${size}: ${first.message.charAt(0).toLowerCase()}${first.message.slice(1)}`;
}

/** Lines of a diff (a final newline does not start another line). */
export function countDiffLines(diff: string): number {
  if (diff === "") return 0;
  let lines = 1;
  for (let at = diff.indexOf("\n"); at !== -1 && at < diff.length - 1; at = diff.indexOf("\n", at + 1)) lines++;
  return lines;
}

/** A diff's size, when it is over the protocol's limits; null when it may be stored. */
export function planDiffTooLarge(diff: string): { bytes: number; lines: number } | null {
  // The byte length bounds the line count's cost, so it is checked first.
  const bytes = Buffer.byteLength(diff, "utf8");
  if (bytes > MAX_PLAN_DIFF_BYTES) return { bytes, lines: countDiffLines(diff) };
  const lines = countDiffLines(diff);
  return lines > MAX_PLAN_DIFF_LINES ? { bytes, lines } : null;
}

/**
 * `summary` within `MAX_PLAN_SUMMARY_LENGTH`: a longer one keeps its start and its end (a list of
 * folders to create ends with the deepest, a count comes last) and says how much was left out. The same
 * summary always comes out the same, so a plan recomputed at apply still equals the approved one. A cut
 * never splits a surrogate pair (a lone surrogate is not valid text, and the server refuses it).
 */
export function boundSummary(summary: string): string {
  if (summary.length <= MAX_PLAN_SUMMARY_LENGTH) return summary;
  const marker = (left: number) => ` … (${left.toLocaleString("en")} characters not shown) … `;
  const room = MAX_PLAN_SUMMARY_LENGTH - marker(summary.length).length;
  let head = Math.floor((room * 2) / 3);
  let tail = summary.length - (room - head);
  if (isLowSurrogate(summary.charCodeAt(head))) head--;
  if (isLowSurrogate(summary.charCodeAt(tail))) tail++;
  return summary.slice(0, head) + marker(tail - head) + summary.slice(tail);
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
