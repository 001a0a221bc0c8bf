import { Type } from "@sinclair/typebox";
import { createHash } from "node:crypto";
import { definePlannedTool, type BlobContent, type ToolContext } from "../define.js";
import { binaryDiff, unifiedDiff } from "../diff.js";
import { ToolError } from "../errors.js";
import { countLines } from "../text.js";
import { LIMITS, pathField, plural, flagField } from "./common.js";
import { blobOf, describeBlob, smallText, writeBlob } from "./write-blob.js";
import { byteCount, hardLinkNote, readCurrent, withTargetDir, writeKeepingMode, writeTarget, type CurrentFile } from "./write-helpers.js";

const input = Type.Object(
  {
    path: pathField("File to create or overwrite"),
    content: Type.Optional(Type.String({ maxLength: LIMITS.textFileBytes, description: "The complete new content (UTF-8); or give blob" })),
    blob: Type.Optional(
      Type.String({
        pattern: "^b_[A-Za-z0-9_-]{22}$",
        description: "Instead of content: the id of a blob you uploaded (POST /api/host/blobs, then PUT its bytes), for binary or large files",
      }),
    ),
    createParents: flagField(true, "Create missing parent folders"),
    overwrite: flagField(true, "Replace an existing file (false: fail if it exists)"),
  },
  { additionalProperties: false },
);

type WriteInput = { path: string; content?: string; blob?: string; createParents?: boolean; overwrite?: boolean };

function describe(real: string, current: CurrentFile | undefined, content: string, bytes: Buffer, missing: string[]) {
  let diff: string;
  let summary: string;
  if (!current) {
    diff = unifiedDiff(null, real, "", content);
    summary = `Create ${real} (${plural(countLines(content), "line")}, ${byteCount(bytes.length)})`;
    if (missing.length) summary += `, creating ${plural(missing.length, "folder")}: ${missing.join(", ")}`;
  } else if (current.kind === "text") {
    diff = unifiedDiff(real, real, current.text!, content);
    summary = diff === "" ? `No change: ${real} already has this content` : `Overwrite ${real} (${byteCount(current.size)} → ${byteCount(bytes.length)})`;
  } else {
    diff = binaryDiff(real, real);
    summary = `Overwrite ${real}, a ${current.kind === "binary" ? "binary" : "large"} file of ${byteCount(current.size)}, with ${byteCount(bytes.length)} of text`;
  }
  summary += hardLinkNote(current);
  return {
    diff,
    summary,
    path: real,
    exists: current !== undefined,
    unchanged: current !== undefined && diff === "",
    bytes: bytes.length,
    sha256: createHash("sha256").update(bytes).digest("hex"),
    createsDirectories: missing,
  };
}

async function run(input: WriteInput, ctx: ToolContext, apply: boolean) {
  if ((input.content === undefined) === (input.blob === undefined))
    throw new ToolError("INVALID_INPUT", `Give the new content as "content" (text) or as "blob" (the id of a blob you uploaded): exactly one of them`);
  if (input.blob !== undefined) {
    const blob = blobOf(ctx, input.blob);
    const text = await smallText(blob, ctx.signal);
    // A small text blob is proposed and written exactly as the same text given as content.
    return text !== undefined ? runText(input, text, ctx, apply) : runBlob(input, blob, ctx, apply);
  }
  return runText(input, input.content!, ctx, apply);
}

async function runText(input: WriteInput, content: string, ctx: ToolContext, apply: boolean) {
  const bytes = Buffer.from(content, "utf8");
  if (bytes.length > LIMITS.textFileBytes) {
    throw new ToolError("FILE_TOO_LARGE", `The content is ${bytes.length} bytes; write_file writes up to ${LIMITS.textFileBytes}`, {
      limit: LIMITS.textFileBytes,
    });
  }
  const target = await writeTarget(ctx.scope, input.path, input.createParents ?? true);
  return withTargetDir(ctx.scope, target, apply, async (dir, created) => {
    const current = dir ? readCurrent(dir, target.name) : undefined;
    if (current && input.overwrite === false) {
      throw new ToolError("ALREADY_EXISTS", `${JSON.stringify(target.real)} already exists (overwrite is false)`, { path: target.real });
    }
    const plan = describe(target.real, current, content, bytes, target.missing);
    if (!apply) return plan;
    // A whole-file overwrite replaces whatever is there now; only a file that appeared meanwhile is refused.
    await writeKeepingMode(dir!, target.name, bytes, current, { unchangedSince: false, signal: ctx.signal });
    return { applied: true, ...plan, createdDirectories: created };
  });
}

/** Content from a blob: a small text blob is proposed as a diff, anything else by size, type and sha256. */
async function runBlob(input: WriteInput, blob: BlobContent, ctx: ToolContext, apply: boolean) {
  const target = await writeTarget(ctx.scope, input.path, input.createParents ?? true);
  return withTargetDir(ctx.scope, target, apply, async (dir, created) => {
    const current = dir ? readCurrent(dir, target.name) : undefined;
    if (current && input.overwrite === false) {
      throw new ToolError("ALREADY_EXISTS", `${JSON.stringify(target.real)} already exists (overwrite is false)`, { path: target.real });
    }
    const plan = describeBlob(target.real, dir, target.name, current, blob, target.missing);
    if (!apply) return plan;
    await writeBlob(dir!, target.name, blob, current, ctx.signal);
    return { applied: true, ...plan, createdDirectories: created };
  });
}

const description =
  "Create a file or replace its whole content: UTF-8 text up to 10 MB as content, or any file (binary, large) as blob, the id of a blob you uploaded first. Missing parent folders are created unless createParents is false. The file's permissions are kept.";

export const writeFile = definePlannedTool({ name: "write_file", description, input, hints: { idempotent: true }, run });
