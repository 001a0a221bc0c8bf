/**
 * Writing inside the roots: a new file content lands through a temp file and a rename in a verified directory
 * handle (`fs-safe.ts`), and a write that must not clobber a concurrent change compares the file's identity first.
 */
import { randomBytes } from "node:crypto";
import fs, { type BigIntStats } from "node:fs";
import path from "node:path";
import { ToolError, fromFsError } from "./errors.js";
import { lstatIn, type DirHandle } from "./fs-safe.js";

const C = fs.constants;

/** What a write compares before its rename, to refuse when the file changed since it was read. */
export interface FileIdentity {
  dev: bigint;
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

export function identityOf(stat: BigIntStats): FileIdentity {
  return { dev: stat.dev, ino: stat.ino, size: stat.size, mtimeNs: stat.mtimeNs, ctimeNs: stat.ctimeNs };
}

function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

export interface AtomicWriteOptions {
  /** Permission bits for the new file (an existing file's are kept by passing them here). */
  mode?: number;
  /** Owner to restore when running as root, so an edit by root does not steal a user's file. */
  owner?: { uid: number; gid: number };
  /** The target must still be this file (FILE_CHANGED otherwise), or must not exist ("absent"). */
  expect?: FileIdentity | "absent";
  signal?: AbortSignal;
}

/**
 * Replaces `name` in `dir` with new content: written to a fresh temp file in the same directory (O_EXCL,
 * O_NOFOLLOW), synced, then renamed over the target. rename(2) replaces a symlink instead of following it, and it
 * gives the name a new inode, so a hard link shared with a file elsewhere is detached, never written through.
 */
export async function writeFileAtomic(dir: DirHandle, name: string, fill: (fd: number) => Promise<void> | void, opts: AtomicWriteOptions = {}): Promise<void> {
  const shown = path.join(dir.path, name);
  const temp = `.tether-${randomBytes(9).toString("hex")}.tmp`;
  let fd: number;
  try {
    fd = fs.openSync(dir.at(temp), C.O_WRONLY | C.O_CREAT | C.O_EXCL | (C.O_NOFOLLOW ?? 0), opts.mode ?? 0o666);
  } catch (error) {
    throw fromFsError(error, shown, "write");
  }
  let renamed = false;
  try {
    try {
      await fill(fd);
      if (opts.mode !== undefined) fs.fchmodSync(fd, opts.mode);
      if (opts.owner && process.getuid?.() === 0) fs.fchownSync(fd, opts.owner.uid, opts.owner.gid);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    if (opts.signal?.aborted) throw new ToolError("ABORTED", "The tool call was cancelled");
    const current = lstatIn(dir, name, { bigint: true });
    if (current?.isDirectory()) throw new ToolError("IS_A_DIRECTORY", `${JSON.stringify(shown)} is a directory`, { path: shown });
    if (opts.expect === "absent" && current) throw new ToolError("ALREADY_EXISTS", `${JSON.stringify(shown)} already exists`, { path: shown });
    if (opts.expect && opts.expect !== "absent" && (!current || !sameIdentity(opts.expect, identityOf(current)))) {
      throw new ToolError("FILE_CHANGED", `${JSON.stringify(shown)} changed while it was being edited; nothing was written`, { path: shown });
    }
    try {
      fs.renameSync(dir.at(temp), dir.at(name));
      renamed = true;
    } catch (error) {
      throw fromFsError(error, shown, "write");
    }
  } finally {
    if (!renamed) {
      try {
        fs.unlinkSync(dir.at(temp));
      } catch {
        /* already gone */
      }
    }
  }
}

export function writeAllSync(fd: number, data: Buffer): void {
  let offset = 0;
  while (offset < data.length) offset += fs.writeSync(fd, data, offset, data.length - offset);
}
