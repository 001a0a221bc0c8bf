import { Type } from "@sinclair/typebox";
import { createHash } from "node:crypto";
import { definePlannedTool, type ToolContext } from "../define.js";
import { unifiedDiff } from "../diff.js";
import { ToolError } from "../errors.js";
import { openDirInScope, parentAndName } from "../fs-safe.js";
import { detectLineEndings, toCrlf } from "../text.js";
import { LIMITS, pathField, plural } from "./common.js";
import { hardLinkNote, readCurrent, requireText, writeKeepingMode } from "./write-helpers.js";

const input = Type.Object(
  {
    path: pathField("File to edit"),
    edits: Type.Array(
      Type.Object(
        {
          find: Type.String({ minLength: 1, maxLength: LIMITS.textFileBytes, description: "Exact text to find; it must occur exactly once in the file" }),
          replace: Type.String({ maxLength: LIMITS.textFileBytes, description: "Text to put in its place" }),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 100 },
    ),
    expectedSha256: Type.Optional(
      Type.String({ pattern: "^[0-9a-f]{64}$", description: "Refuse unless the file's current sha256 is this (the plan reports it)" }),
    ),
  },
  { additionalProperties: false },
);

type EditInput = { path: string; edits: { find: string; replace: string }[]; expectedSha256?: string };

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

function countOccurrences(text: string, find: string): { count: number; first: number } {
  let count = 0;
  let first = -1;
  // Overlapping occurrences count: "aa" occurs twice in "aaa", so it does not identify one place.
  for (let i = text.indexOf(find); i !== -1 && count < 2; i = text.indexOf(find, i + 1)) {
    if (count === 0) first = i;
    count++;
  }
  return { count, first };
}

/**
 * Locates every edit in the file as it is now. All finds are matched against the same original text (not one
 * after another), so the order of edits does not matter and a replacement is never searched again.
 */
function applyEdits(text: string, edits: EditInput["edits"], shown: string): string {
  // A CRLF file edited with LF text (what models write) still matches, and the result keeps CRLF.
  const crlf = detectLineEndings(text) === "crlf";
  const located = edits.map((edit, index) => {
    const find = crlf ? toCrlf(edit.find) : edit.find;
    const replace = crlf ? toCrlf(edit.replace) : edit.replace;
    const { count, first } = countOccurrences(text, find);
    if (count !== 1) {
      const cause = count === 0 ? "FIND_NOT_FOUND" : "FIND_AMBIGUOUS";
      const what = count === 0 ? "was not found" : "occurs more than once; add surrounding text so it matches exactly one place";
      // Apply answers the find's own error too: it cannot know whether a plan ever matched (a direct
      // `--apply` had none). An approved apply re-plans first, and `invokeTool` reports that as FILE_CHANGED.
      throw new ToolError(cause, `Edit ${index}: the find text ${what} in ${JSON.stringify(shown)}; nothing was written`, {
        path: shown,
        edit: index,
        find: edit.find.slice(0, 200),
      });
    }
    return { start: first, end: first + find.length, replace, index };
  });
  located.sort((a, b) => a.start - b.start);
  for (let i = 1; i < located.length; i++) {
    if (located[i]!.start < located[i - 1]!.end) {
      throw new ToolError(
        "EDITS_OVERLAP",
        `Edits ${located[i - 1]!.index} and ${located[i]!.index} overlap in ${JSON.stringify(shown)}; merge them into one edit`,
        {
          path: shown,
          edits: [located[i - 1]!.index, located[i]!.index],
        },
      );
    }
  }
  let out = "";
  let at = 0;
  for (const edit of located) {
    out += text.slice(at, edit.start) + edit.replace;
    at = edit.end;
  }
  return out + text.slice(at);
}

async function run(input: EditInput, ctx: ToolContext, apply: boolean) {
  const real = await ctx.scope.resolve(input.path);
  const { parent, name } = parentAndName(ctx.scope, real);
  const dir = openDirInScope(ctx.scope, parent);
  try {
    const current = readCurrent(dir, name);
    requireText(current, real);
    const before = current.text;
    const beforeSha = sha256(before);
    if (input.expectedSha256 && input.expectedSha256 !== beforeSha) {
      throw new ToolError("FILE_CHANGED", `${JSON.stringify(real)} is not the version the edit was planned against (its sha256 differs); nothing was written`, {
        path: real,
        expectedSha256: input.expectedSha256,
        actualSha256: beforeSha,
      });
    }
    const after = applyEdits(before, input.edits, real);
    const diff = unifiedDiff(real, real, before, after);
    const bytes = Buffer.from(after, "utf8");
    if (bytes.length > LIMITS.textFileBytes) {
      throw new ToolError("FILE_TOO_LARGE", `The edited file would be ${bytes.length} bytes; the limit is ${LIMITS.textFileBytes}`, {
        path: real,
        limit: LIMITS.textFileBytes,
      });
    }
    const plan = {
      diff,
      summary:
        (diff === "" ? `No change to ${real}: the edits leave it as it is` : `Edit ${real}: ${plural(input.edits.length, "replacement")}`) +
        hardLinkNote(current),
      path: real,
      unchanged: diff === "",
      sha256: beforeSha,
      sha256After: sha256(after),
      lineEndings: detectLineEndings(before),
    };
    if (!apply) return plan;
    if (diff !== "") {
      // `expect` makes the rename refuse if the file changed after it was read above.
      await writeKeepingMode(dir, name, bytes, current, { unchangedSince: true, signal: ctx.signal });
    }
    return { applied: true, ...plan };
  } finally {
    dir.close();
  }
}

const description =
  "Edit a UTF-8 text file by exact find/replace: each find must occur exactly once in the current file (otherwise the call fails, saying not found or ambiguous), and edits must not overlap. Line endings (LF or CRLF) and permissions are kept. Applying re-checks every find against the file as it is then and refuses if the file changed.";

export const editFile = definePlannedTool({ name: "edit_file", description, input, hints: { destructive: false }, run });
