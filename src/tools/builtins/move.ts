import fs from "node:fs";
import type { ToolContext } from "../define.js";
import { ToolError, fromFsError } from "../errors.js";
import { lstatIn, openChildDir, openDirInScope, parentAndName, entryTypeOf, type DirHandle } from "../fs-safe.js";
import { isWithin } from "../paths.js";
import { lstatInScope, missingAncestors, notFound, plural, transferTool, type TransferInput } from "./common.js";
import { refuseRootsInside } from "./delete.js";
import { copyFileBetween, copyTreeContents, removeEntry, summarizeTree, type CopyReport } from "./tree-ops.js";

/** rename(2) cannot cross file systems: copy (links stay links), then remove the source if everything made it. */
async function moveAcrossDevices(srcDir: DirHandle, srcName: string, dstDir: DirHandle, dstName: string, overwrite: boolean, signal?: AbortSignal) {
  const stat = fs.lstatSync(srcDir.at(srcName));
  if (stat.isSymbolicLink()) {
    if (overwrite && lstatIn(dstDir, dstName)) fs.unlinkSync(dstDir.at(dstName));
    fs.symlinkSync(fs.readlinkSync(srcDir.at(srcName)), dstDir.at(dstName));
  } else if (stat.isFile()) {
    await copyFileBetween(srcDir, srcName, dstDir, dstName, { ...(overwrite ? {} : { expect: "absent" as const }), ...(signal ? { signal } : {}) });
  } else if (stat.isDirectory()) {
    fs.mkdirSync(dstDir.at(dstName), 0o700);
    const report: CopyReport = { files: 0, directories: 1, symlinks: 0, bytes: 0, skipped: [] };
    const from = openChildDir(srcDir, srcName);
    try {
      const to = openChildDir(dstDir, dstName);
      try {
        await copyTreeContents(from, to, report, { recreateSymlinks: true, ...(signal ? { signal } : {}) });
        to.chmod(stat.mode & 0o777);
      } finally {
        to.close();
      }
    } finally {
      from.close();
    }
    if (report.skipped.length > 0) {
      throw new ToolError(
        "REFUSED",
        `Moved a copy across file systems, but ${plural(report.skipped.length, "entry")} (special files) could not be moved, so the source was kept`,
        {
          skipped: report.skipped.slice(0, 100),
        },
      );
    }
  } else {
    throw new ToolError("SPECIAL_FILE", `Cannot move a ${entryTypeOf(stat)} across file systems`);
  }
  await removeEntry(srcDir, srcName, { files: 0, directories: 0, symlinks: 0, other: 0 }, signal);
}

async function run(input: TransferInput, ctx: ToolContext, apply: boolean) {
  // Both ends are link-level: moving a symlink moves the link, as mv does.
  const src = await ctx.scope.resolve(input.from, { followFinal: false });
  const dst = await ctx.scope.resolve(input.to, { followFinal: false });
  const srcParts = parentAndName(ctx.scope, src);
  const dstParts = parentAndName(ctx.scope, dst);
  refuseRootsInside(ctx.scope, src, "move");
  if (src === dst) throw new ToolError("INVALID_INPUT", `Invalid "to": it is the same as "from"`, { field: "to" });
  const srcStat = lstatInScope(ctx.scope, src);
  if (!srcStat) throw notFound(input.from);
  const type = entryTypeOf(srcStat);
  if (type === "directory" && isWithin(src, dst)) throw new ToolError("REFUSED", `Cannot move the folder ${src} into itself (${dst})`, { from: src, to: dst });
  const missing = missingAncestors(ctx.scope, dst);
  if (missing.length && input.createParents === false) {
    throw new ToolError("NOT_FOUND", `The folder ${JSON.stringify(missing[0])} does not exist (set createParents to create it)`, { path: missing[0] });
  }
  const checkDestination = (existing: fs.Stats | undefined) => {
    if (!existing) return;
    if (!input.overwrite) throw new ToolError("ALREADY_EXISTS", `${JSON.stringify(dst)} already exists (set overwrite to replace a file)`, { path: dst });
    if (existing.isDirectory() || type === "directory") {
      throw new ToolError("ALREADY_EXISTS", `${JSON.stringify(dst)} already exists; only a file or link can replace a file or link`, { path: dst });
    }
  };
  const existing = missing.length ? undefined : lstatInScope(ctx.scope, dst);
  checkDestination(existing);

  let counts = "";
  if (type === "directory") {
    const dir = openDirInScope(ctx.scope, src);
    try {
      const tree = await summarizeTree(dir, ctx.signal);
      counts = ` with ${plural(tree.files, "file")} and ${plural(tree.directories, "folder")} inside`;
    } finally {
      dir.close();
    }
  }
  const plan = {
    diff: "",
    summary:
      `Move the ${type === "directory" ? "folder" : type} ${src} to ${dst}${counts}` +
      (existing ? `, replacing the existing ${entryTypeOf(existing)}` : "") +
      (missing.length ? `, creating ${plural(missing.length, "folder")}: ${missing.join(", ")}` : ""),
    from: src,
    to: dst,
    type,
    replaces: existing !== undefined,
    createsDirectories: missing,
  };
  if (!apply) return plan;

  const created: string[] = [];
  const srcDir = openDirInScope(ctx.scope, srcParts.parent);
  try {
    const dstDir = openDirInScope(ctx.scope, dstParts.parent, { create: true, created });
    try {
      if (!lstatIn(srcDir, srcParts.name)) throw notFound(input.from);
      checkDestination(lstatIn(dstDir, dstParts.name));
      const from = srcDir.at(srcParts.name);
      const to = dstDir.at(dstParts.name);
      let crossDevice = false;
      try {
        if (!input.overwrite && type === "file") {
          // link + unlink cannot replace a destination that appeared since the check; rename could. Files only:
          // some systems' link(2) follows a symlink, which would hard-link whatever it points to.
          try {
            fs.linkSync(from, to);
            fs.unlinkSync(from);
          } catch (error) {
            const errno = (error as NodeJS.ErrnoException).code;
            if (errno === "EEXIST" || errno === "EXDEV") throw error;
            fs.renameSync(from, to); // no hard links on this file system
          }
        } else {
          fs.renameSync(from, to);
        }
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw fromFsError(error, dst, "move to");
        crossDevice = true;
      }
      if (crossDevice) {
        try {
          await moveAcrossDevices(srcDir, srcParts.name, dstDir, dstParts.name, input.overwrite ?? false, ctx.signal);
        } catch (error) {
          throw fromFsError(error, dst, "move to");
        }
      }
      return { applied: true, ...plan, crossDevice, createdDirectories: created };
    } finally {
      dstDir.close();
    }
  } finally {
    srcDir.close();
  }
}

export const moveTool = transferTool(
  { name: "move", from: "What to move", to: "New path", run },
  "Move or rename a file, folder or symlink (the link itself). `to` is the full new path, not a folder to move into. An existing destination file is replaced only with overwrite: true; a folder is never replaced. Works across file systems (copy, then delete).",
);
