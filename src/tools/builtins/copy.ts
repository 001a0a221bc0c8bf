import fs from "node:fs";
import type { ToolContext } from "../define.js";
import { binaryDiff, unifiedDiff } from "../diff.js";
import { ToolError, fromFsError } from "../errors.js";
import { lstatIn, openChildDir, openDirInScope, parentAndName, type DirHandle } from "../fs-safe.js";
import { openFileInScope, readHeadSync } from "../safe-read.js";
import { isWithin } from "../paths.js";
import { isBinaryContent } from "../text.js";
import { LIMITS, lstatInScope, notFound, plural, transferTool, type TransferInput } from "./common.js";
import { copyFileBetween, copyTreeContents, summarizeTree, type CopyReport } from "./tree-ops.js";
import { byteCount, readCurrent, withTargetDir, writeTarget, type CurrentFile, type WriteTarget } from "./write-helpers.js";

function sourceText(ctx: ToolContext, real: string, size: number): string | undefined {
  if (size > LIMITS.textFileBytes) return undefined;
  const file = openFileInScope(ctx.scope, real);
  try {
    const bytes = readHeadSync(file.fd, size);
    return isBinaryContent(bytes) ? undefined : bytes.toString("utf8");
  } finally {
    fs.closeSync(file.fd);
  }
}

async function run(input: TransferInput, ctx: ToolContext, apply: boolean) {
  // The source is read through links (its content is copied); the destination is written like write_file.
  const src = await ctx.scope.resolve(input.from);
  const srcStat = lstatInScope(ctx.scope, src);
  if (!srcStat) throw notFound(input.from);
  const isDir = srcStat.isDirectory();
  if (!isDir && !srcStat.isFile()) throw new ToolError("SPECIAL_FILE", `${JSON.stringify(src)} is not a regular file or folder`, { path: src });
  const target = await writeTarget(ctx.scope, input.to, input.createParents ?? true);
  if (target.real === src) throw new ToolError("INVALID_INPUT", `Invalid "to": it is the same as "from"`, { field: "to" });
  if (isDir && isWithin(src, target.real))
    throw new ToolError("REFUSED", `Cannot copy the folder ${src} into itself (${target.real})`, { from: src, to: target.real });

  return withTargetDir(ctx.scope, target, apply, async (dstDir, created) => {
    const existing = dstDir ? lstatIn(dstDir, target.name) : undefined;
    if (existing && (isDir || existing.isDirectory() || !input.overwrite)) {
      throw new ToolError(
        "ALREADY_EXISTS",
        `${JSON.stringify(target.real)} already exists${isDir || existing.isDirectory() ? "; a folder is never merged or replaced by copy" : " (set overwrite to replace it)"}`,
        { path: target.real },
      );
    }
    const creating = target.missing.length ? `, creating ${plural(target.missing.length, "folder")}: ${target.missing.join(", ")}` : "";
    const copy = { ctx, src, srcStat, target, dstDir, created, creating, apply };
    return isDir ? copyFolder(copy) : copyFile(copy, existing && dstDir ? readCurrent(dstDir, target.name) : undefined);
  });
}

/** One copy, its destination checked: what `copyFile` and `copyFolder` plan, and apply when `apply` is set. */
interface Copy {
  ctx: ToolContext;
  src: string;
  srcStat: fs.Stats;
  target: WriteTarget;
  /** The destination's parent folder; undefined when planning a copy into folders not created yet. */
  dstDir: DirHandle | undefined;
  created: string[];
  /** The end of the summary naming the folders the copy creates ("" when none). */
  creating: string;
  apply: boolean;
}

/** Copies a file, replacing `current` (the file at the destination) when there is one. */
async function copyFile({ ctx, src, srcStat, target, dstDir, created, creating, apply }: Copy, current: CurrentFile | undefined) {
  let diff = "";
  if (current) {
    const text = sourceText(ctx, src, srcStat.size);
    diff = current.kind === "text" && text !== undefined ? unifiedDiff(target.real, target.real, current.text!, text) : binaryDiff(target.real, target.real);
  }
  const plan = {
    diff,
    summary: `Copy the file ${src} to ${target.real} (${byteCount(srcStat.size)})${current ? `, replacing the existing file` : ""}${creating}`,
    from: src,
    to: target.real,
    type: "file",
    bytes: srcStat.size,
    replaces: current !== undefined,
    createsDirectories: target.missing,
  };
  if (!apply) return plan;
  const srcParent = parentAndName(ctx.scope, src);
  const srcDir = openDirInScope(ctx.scope, srcParent.parent);
  try {
    const bytes = await copyFileBetween(srcDir, srcParent.name, dstDir!, target.name, {
      ...(current ? { expect: current.identity } : { expect: "absent" as const }),
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
    return { applied: true, ...plan, bytes, createdDirectories: created };
  } finally {
    srcDir.close();
  }
}

/** Copies a folder with everything in it into a new folder; symlinks and special files are skipped. */
async function copyFolder({ ctx, src, target, dstDir, created, creating, apply }: Copy) {
  const from = openDirInScope(ctx.scope, src);
  try {
    const tree = await summarizeTree(from, ctx.signal);
    const skipped = tree.symlinks + tree.other;
    const plan = {
      diff: "",
      summary:
        `Copy the folder ${src} to ${target.real}: ${plural(tree.files, "file")} (${byteCount(tree.bytes)}), ${plural(tree.directories, "folder")}` +
        (skipped ? `; ${plural(skipped, "symlink or special file")} will be skipped` : "") +
        creating,
      from: src,
      to: target.real,
      type: "directory",
      totals: { files: tree.files, directories: tree.directories + 1, bytes: tree.bytes, skipped },
      copies: tree.entries,
      truncated: tree.truncated,
      limit: tree.limit,
      omitted: tree.omitted,
      createsDirectories: target.missing,
    };
    if (!apply) return plan;
    const report: CopyReport = { files: 0, directories: 1, symlinks: 0, bytes: 0, skipped: [] };
    try {
      fs.mkdirSync(dstDir!.at(target.name), 0o700);
    } catch (error) {
      throw fromFsError(error, target.real, "create folder");
    }
    const to = openChildDir(dstDir!, target.name);
    try {
      await copyTreeContents(from, to, report, { recreateSymlinks: false, ...(ctx.signal ? { signal: ctx.signal } : {}) });
      to.chmod(from.stat().mode & 0o777);
    } catch (error) {
      throw fromFsError(error, target.real, "copy to");
    } finally {
      to.close();
    }
    return {
      applied: true,
      ...plan,
      copied: { files: report.files, directories: report.directories, bytes: report.bytes },
      skipped: report.skipped.slice(0, LIMITS.planEntries),
      createdDirectories: created,
    };
  } finally {
    from.close();
  }
}

export const copyTool = transferTool(
  { name: "copy", from: "File or folder to copy", to: "Destination path", run },
  "Copy a file, or a folder with everything in it, to a new path (`to` is the full destination path, not a folder to copy into). An existing destination file is replaced only with overwrite: true; folders are never merged. Symlinks inside a copied folder are skipped, never followed. Permissions are kept.",
);
