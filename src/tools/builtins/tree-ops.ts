/**
 * Whole-tree work for copy, move and delete, always through directory handles: a directory is entered only via
 * its parent's handle without following symlinks, and every unlink, rmdir and mkdir names a single component
 * inside a pinned directory. A symlink inside a tree is removed (delete), recreated as the same link (move across
 * file systems) or skipped (copy); its target is never touched.
 */
import fs from "node:fs";
import { ToolError, throwIfAborted } from "../errors.js";
import { writeFileAtomic, type FileIdentity } from "../atomic-write.js";
import { openChildDir, type DirHandle } from "../fs-safe.js";
import { openFileIn } from "../safe-read.js";
import { DEFAULT_MAX_DEPTH, readSortedEntries, walkTree } from "../walk.js";
import { LIMITS } from "./common.js";
import { readAt } from "./read-file.js";

export interface TreeSummary {
  files: number;
  directories: number;
  symlinks: number;
  other: number;
  bytes: number;
  entries: { path: string; type: string; size?: number }[];
  truncated: boolean;
  limit: number;
  omitted: number;
}

/** What a tree holds, for a plan: totals plus the first `limit` entries. */
export async function summarizeTree(dir: DirHandle, signal?: AbortSignal): Promise<TreeSummary> {
  const summary: TreeSummary = {
    files: 0,
    directories: 0,
    symlinks: 0,
    other: 0,
    bytes: 0,
    entries: [],
    truncated: false,
    limit: LIMITS.planEntries,
    omitted: 0,
  };
  await walkTree(dir, {
    recursive: true,
    maxDepth: Number.MAX_SAFE_INTEGER,
    ...(signal ? { signal } : {}),
    visit: (entry) => {
      let size: number | undefined;
      if (entry.type === "file") {
        try {
          size = fs.lstatSync(entry.dir.at(entry.name)).size;
        } catch {
          size = 0;
        }
        summary.files++;
        summary.bytes += size;
      } else if (entry.type === "directory") summary.directories++;
      else if (entry.type === "symlink") summary.symlinks++;
      else summary.other++;
      if (summary.entries.length < LIMITS.planEntries) summary.entries.push({ path: entry.rel, type: entry.type, ...(size !== undefined ? { size } : {}) });
      else {
        summary.truncated = true;
        summary.omitted++;
      }
      return summary.files + summary.directories + summary.symlinks + summary.other < LIMITS.countEntries;
    },
  });
  return summary;
}

export interface RemoveCounts {
  files: number;
  directories: number;
  symlinks: number;
  other: number;
}

let operations = 0;
async function pace(signal?: AbortSignal): Promise<void> {
  if (++operations % 256 === 0) {
    await new Promise((resolve) => setImmediate(resolve));
    throwIfAborted(signal);
  }
}

/** Removes `name` from `parent`: a file or link is unlinked, a directory emptied depth-first, then removed. */
export async function removeEntry(parent: DirHandle, name: string, counts: RemoveCounts, signal?: AbortSignal, depth = 0): Promise<void> {
  const stat = fs.lstatSync(parent.at(name));
  if (!stat.isDirectory()) {
    fs.unlinkSync(parent.at(name));
    if (stat.isFile()) counts.files++;
    else if (stat.isSymbolicLink()) counts.symlinks++;
    else counts.other++;
    await pace(signal);
    return;
  }
  if (depth >= DEFAULT_MAX_DEPTH * 4) throw new ToolError("REFUSED", `The tree is more than ${DEFAULT_MAX_DEPTH * 4} levels deep; not deleting it`);
  const child = openChildDir(parent, name);
  try {
    for (const entry of readSortedEntries(child)) await removeEntry(child, entry.name, counts, signal, depth + 1);
  } finally {
    child.close();
  }
  fs.rmdirSync(parent.at(name));
  counts.directories++;
  await pace(signal);
}

/** Copies the regular file `srcName` into `dst` as `dstName` through a temp file; returns its size. */
export async function copyFileBetween(
  src: DirHandle,
  srcName: string,
  dst: DirHandle,
  dstName: string,
  opts: { expect?: FileIdentity | "absent"; signal?: AbortSignal } = {},
): Promise<number> {
  const file = openFileIn(src, srcName);
  try {
    const buffer = Buffer.allocUnsafe(Math.min(1024 * 1024, Math.max(1, file.stat.size)));
    let copied = 0;
    await writeFileAtomic(
      dst,
      dstName,
      async (fd) => {
        for (;;) {
          throwIfAborted(opts.signal);
          const n = await readAt(file.fd, buffer, copied);
          if (n === 0) break;
          let written = 0;
          while (written < n) written += fs.writeSync(fd, buffer, written, n - written);
          copied += n;
        }
      },
      { mode: file.stat.mode & 0o777, ...(opts.expect ? { expect: opts.expect } : {}), ...(opts.signal ? { signal: opts.signal } : {}) },
    );
    return copied;
  } finally {
    fs.closeSync(file.fd);
  }
}

export interface CopyReport {
  files: number;
  directories: number;
  symlinks: number;
  bytes: number;
  skipped: { path: string; type: string; reason: string }[];
}

/**
 * Copies the contents of `src` into the (new, empty) directory `dst`. Symlinks are skipped, or recreated with
 * the same target text when `recreateSymlinks` (a move keeps links as links). FIFOs, sockets and devices are skipped.
 */
export async function copyTreeContents(
  src: DirHandle,
  dst: DirHandle,
  report: CopyReport,
  opts: { recreateSymlinks: boolean; signal?: AbortSignal },
  rel = "",
  depth = 0,
): Promise<void> {
  for (const entry of readSortedEntries(src)) {
    const path = rel ? `${rel}/${entry.name}` : entry.name;
    const stat = fs.lstatSync(src.at(entry.name));
    if (stat.isFile()) {
      report.bytes += await copyFileBetween(src, entry.name, dst, entry.name, { expect: "absent", ...(opts.signal ? { signal: opts.signal } : {}) });
      report.files++;
    } else if (stat.isDirectory()) {
      if (depth >= DEFAULT_MAX_DEPTH) {
        report.skipped.push({ path, type: "directory", reason: `deeper than ${DEFAULT_MAX_DEPTH} levels` });
        continue;
      }
      // Created owner-writable so it can be filled, then given the source's mode.
      fs.mkdirSync(dst.at(entry.name), 0o700);
      const from = openChildDir(src, entry.name);
      try {
        const to = openChildDir(dst, entry.name);
        try {
          await copyTreeContents(from, to, report, opts, path, depth + 1);
          to.chmod(stat.mode & 0o777);
        } finally {
          to.close();
        }
      } finally {
        from.close();
      }
      report.directories++;
    } else if (stat.isSymbolicLink() && opts.recreateSymlinks) {
      fs.symlinkSync(fs.readlinkSync(src.at(entry.name)), dst.at(entry.name));
      report.symlinks++;
    } else {
      report.skipped.push({
        path,
        type: stat.isSymbolicLink() ? "symlink" : "special",
        reason: stat.isSymbolicLink() ? "symlinks are not copied" : "not a regular file",
      });
    }
    await pace(opts.signal);
  }
}
