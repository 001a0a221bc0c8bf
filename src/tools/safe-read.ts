/**
 * Reading a regular file inside the roots: opened through a verified directory handle (`fs-safe.ts`), never
 * following a symlink, never blocking on a FIFO, never reading a device, and read no further than asked.
 */
import fs, { type Stats } from "node:fs";
import path from "node:path";
import { ToolError, fromFsError } from "./errors.js";
import { entryTypeOf, isSymlinkAt, parentAndName, pathChanged, safeFsMode, withDir, type DirHandle } from "./fs-safe.js";
import type { Scope } from "./scope.js";

/** O_NOFOLLOW: a final symlink is never followed. O_NONBLOCK so a FIFO can never hang the open; O_NOCTTY so a tty never becomes ours. */
const READ_FLAGS = fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0) | (fs.constants.O_NOCTTY ?? 0);

export interface OpenedFile {
  fd: number;
  stat: Stats;
  path: string;
}

/**
 * Opens the regular file `name` in `dir` for reading. Never follows a symlink, never blocks on a FIFO, and never
 * reads a device: anything but a regular file is closed again before a byte is read.
 */
export function openFileIn(dir: DirHandle, name: string, opts: { verifyPath?: boolean } = {}): OpenedFile {
  const shown = dir.path.endsWith(path.sep) ? dir.path + name : dir.path + path.sep + name;
  const p = dir.at(name);
  let before: Stats | undefined;
  if (safeFsMode() === "fallback") {
    try {
      before = fs.lstatSync(p);
    } catch (error) {
      throw fromFsError(error, shown, "open");
    }
    refuseNonRegular(before, shown);
  }
  let fd: number;
  try {
    fd = fs.openSync(p, READ_FLAGS);
  } catch (error) {
    const errno = (error as NodeJS.ErrnoException).code;
    if (errno === "ELOOP" || (errno === "ENOTDIR" && isSymlinkAt(p))) throw pathChanged(shown, "the file is a symlink now");
    throw fromFsError(error, shown, "open");
  }
  try {
    const stat = fs.fstatSync(fd);
    refuseNonRegular(stat, shown);
    if (before) {
      if (before.dev !== stat.dev || before.ino !== stat.ino) throw pathChanged(shown, "the file was replaced while opening it");
      // No handle path to ask for: re-resolve the name now and require it to still be this very file.
      let again: Stats;
      try {
        if (fs.realpathSync.native(shown) !== shown) throw new Error("moved");
        again = fs.lstatSync(shown);
      } catch {
        throw pathChanged(shown, "the path no longer leads to the opened file");
      }
      if (again.dev !== stat.dev || again.ino !== stat.ino) throw pathChanged(shown, "the path no longer leads to the opened file");
    }
    if (opts.verifyPath !== false && safeFsMode() === "proc") {
      const actual = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (actual !== shown) throw pathChanged(shown, "the opened file is not at the checked path");
    }
    return { fd, stat, path: shown };
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
}

function refuseNonRegular(stat: Stats, shown: string): void {
  if (stat.isFile()) return;
  const type = entryTypeOf(stat);
  if (type === "directory") throw new ToolError("IS_A_DIRECTORY", `${JSON.stringify(shown)} is a directory`, { path: shown });
  if (type === "symlink") throw pathChanged(shown, "the file is a symlink now");
  throw new ToolError("SPECIAL_FILE", `${JSON.stringify(shown)} is a ${type}, not a regular file; it is never read`, { path: shown, type });
}

/** Opens a regular file named by a real path from `scope.resolve`. */
export function openFileInScope(scope: Scope, realPath: string): OpenedFile {
  if (scope.roots.includes(realPath)) throw new ToolError("IS_A_DIRECTORY", `${JSON.stringify(realPath)} is a directory`, { path: realPath });
  const { parent, name } = parentAndName(scope, realPath);
  return withDir(scope, parent, (dir) => openFileIn(dir, name));
}

/**
 * Reads up to `max` bytes from the start of an open file. With `enough` (the size fstat reported), stops once
 * that much is in, saving the read that would only report end of file.
 */
export function readHeadSync(fd: number, max: number, enough = max): Buffer {
  const buffer = Buffer.allocUnsafe(max);
  let total = 0;
  while (total < max && total < enough) {
    const n = fs.readSync(fd, buffer, total, max - total, total);
    if (n === 0) break;
    total += n;
  }
  return buffer.subarray(0, total);
}
