import { Type } from "@sinclair/typebox";
import { definePlannedTool, type ToolContext } from "../define.js";
import { unifiedDiff } from "../diff.js";
import { ToolError } from "../errors.js";
import { LIMITS, pathField, plural, flagField } from "./common.js";
import { byteCount, hardLinkNote, readCurrent, requireText, withTargetDir, writeKeepingMode, writeTarget } from "./write-helpers.js";
import { countLines } from "../text.js";

const input = Type.Object(
  {
    path: pathField("File to append to (created if missing)"),
    content: Type.String({ minLength: 1, maxLength: LIMITS.textFileBytes, description: "Text to add at the end, as is (add a leading newline if needed)" }),
    createParents: flagField(true, "Create missing parent folders"),
  },
  { additionalProperties: false },
);

type AppendInput = { path: string; content: string; createParents?: boolean };

async function run(input: AppendInput, ctx: ToolContext, apply: boolean) {
  const target = await writeTarget(ctx.scope, input.path, input.createParents ?? true);
  return withTargetDir(ctx.scope, target, apply, async (dir, created) => {
    const current = dir ? readCurrent(dir, target.name) : undefined;
    if (current) requireText(current, target.real);
    const before = current?.text ?? "";
    const after = before + input.content;
    const bytes = Buffer.from(after, "utf8");
    if (bytes.length > LIMITS.textFileBytes) {
      throw new ToolError("FILE_TOO_LARGE", `The file would grow to ${bytes.length} bytes; append_file handles files up to ${LIMITS.textFileBytes}`, {
        path: target.real,
        limit: LIMITS.textFileBytes,
      });
    }
    const added = Buffer.byteLength(input.content);
    const plan = {
      diff: unifiedDiff(current ? target.real : null, target.real, before, after),
      summary:
        (current
          ? `Append ${byteCount(added)} (${plural(countLines(input.content), "line")}) to ${target.real}`
          : `Create ${target.real} with ${byteCount(added)}${target.missing.length ? `, creating ${plural(target.missing.length, "folder")}: ${target.missing.join(", ")}` : ""}`) +
        hardLinkNote(current),
      path: target.real,
      exists: current !== undefined,
      bytesAppended: added,
      createsDirectories: target.missing,
    };
    if (!apply) return plan;
    // A rewrite through a temp file rather than O_APPEND: atomic, and a hard link to a file elsewhere is
    // detached rather than written through. `expect` refuses if someone else appended meanwhile.
    await writeKeepingMode(dir!, target.name, bytes, current, { unchangedSince: true, signal: ctx.signal });
    return { applied: true, ...plan, createdDirectories: created };
  });
}

const description = "Append text to the end of a UTF-8 text file (up to 10 MB in total), creating the file if it does not exist. Permissions are kept.";

export const appendFile = definePlannedTool({ name: "append_file", description, input, hints: { destructive: false }, run });
