/**
 * File-system access that stays inside the roots even while the tree changes under it.
 *
 * A path checked by `scope.resolve` can be swapped (a directory renamed away and replaced by a symlink) before it
 * is used. So nothing here opens a caller's path by name. On Linux every operation starts from a root opened as a
 * directory handle, whose real path is verified with readlink(/proc/self/fd/N), and descends one component at a
 * time with O_NOFOLLOW. Children are then reached as `/proc/self/fd/N/name`: the kernel looks `name` up inside the
 * directory the handle holds, whatever happened to the path since, which gives openat(2) semantics without a
 * native addon. Only the final component is ever looked up by name, and each use states whether it may be a
 * symlink (it never may be followed: opens use O_NOFOLLOW, and unlink/rename/mkdir/rmdir never follow).
 *
 * Elsewhere (no /proc: macOS, Windows) the fallback checks identities instead: a directory's dev+ino from lstat is
 * recorded and re-checked before each use, and an opened file's fstat dev+ino must equal the lstat of the name.
 * That narrows the race window to a few syscalls but cannot close it; the Linux path has no such window.
 *
 * A directory handle that is moved outside a root after it was opened keeps working where it now is; no
 * path-based API can prevent that (openat-based sandboxes behave the same way).
 */
import { randomBytes } from "node:crypto";
import fs, { type BigIntStats, type Dirent, type Stats } from "node:fs";
import path from "node:path";
import { ToolError, fromFsError } from "./errors.js";
import { relativeWithin, splitAbsolute } from "./paths.js";
import type { Scope } from "./scope.js";

const C = fs.constants;
const O_DIRECTORY = C.O_DIRECTORY ?? 0;
const O_NOFOLLOW = C.O_NOFOLLOW ?? 0;
const O_NONBLOCK = C.O_NONBLOCK ?? 0;
const O_NOCTTY = C.O_NOCTTY ?? 0;
const DIR_FLAGS = C.O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
/** O_NONBLOCK so a FIFO can never hang the open; O_NOCTTY so a tty never becomes ours. */
export const READ_FLAGS = C.O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

export type SafeFsMode = "proc" | "fallback";
let forcedMode: SafeFsMode | undefined;
let detectedMode: SafeFsMode | undefined;

/** Which strategy is in use; tests force the fallback to cover it on Linux. */
export function safeFsMode(): SafeFsMode {
  if (forcedMode) return forcedMode;
  if (detectedMode) return detectedMode;
  detectedMode = "fallback";
  if (process.platform === "linux") {
    try {
      const fd = fs.openSync("/", DIR_FLAGS);
      try {
        if (fs.readlinkSync(`/proc/self/fd/${fd}`) === "/") detectedMode = "proc";
      } finally {
        fs.closeSync(fd);
      }
    } catch {
      /* no /proc: fall back */
    }
  }
  return detectedMode;
}

/** Test hook, not exported from the package index. */
export function setSafeFsModeForTesting(mode: SafeFsMode | undefined): void {
  forcedMode = mode;
}

function assertName(name: string): void {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0") || (process.platform === "win32" && name.includes("\\"))) {
    throw new ToolError("INTERNAL", `Not a single path component: ${JSON.stringify(name)}`);
  }
}

function changed(shownPath: string, why: string): ToolError {
  return new ToolError("PATH_CHANGED", `${JSON.stringify(shownPath)} changed while it was being used (${why}); nothing was done`, { path: shownPath });
}

/** A directory held open (Linux) or pinned by identity (fallback). */
export class DirHandle {
  private constructor(
    /** Real absolute path this directory had when it was opened and verified. */
    readonly path: string,
    private fd: number,
    private readonly dev: number,
    private readonly ino: number,
  ) {}

  static fromFd(realPath: string, fd: number): DirHandle {
    return new DirHandle(realPath, fd, 0, 0);
  }

  static fromIdentity(realPath: string, stat: Stats): DirHandle {
    return new DirHandle(realPath, -1, stat.dev, stat.ino);
  }

  /** The path to hand a syscall for the child `name`: resolved inside this very directory. */
  at(name: string): string {
    assertName(name);
    if (this.fd >= 0) return `/proc/self/fd/${this.fd}/${name}`;
    if (this.fd === -2) throw new ToolError("INTERNAL", "Directory handle used after close");
    this.verify();
    return path.join(this.path, name);
  }

  /** The path to hand a syscall for the directory itself. */
  self(): string {
    if (this.fd >= 0) return `/proc/self/fd/${this.fd}`;
    if (this.fd === -2) throw new ToolError("INTERNAL", "Directory handle used after close");
    this.verify();
    return this.path;
  }

  /** Status of the directory itself. */
  stat(): Stats {
    if (this.fd >= 0) return fs.fstatSync(this.fd);
    this.verify();
    return fs.lstatSync(this.path);
  }

  /** chmod of the directory itself, through the handle (a name could have become a symlink). */
  chmod(mode: number): void {
    if (this.fd >= 0) return fs.fchmodSync(this.fd, mode);
    this.verify();
    fs.chmodSync(this.path, mode);
  }

  /** Fallback only: the name must still lead to the directory that was checked. */
  verify(): void {
    if (this.fd >= 0) return;
    let stat: Stats;
    try {
      stat = fs.lstatSync(this.path);
    } catch {
      throw changed(this.path, "the directory disappeared");
    }
    if (!stat.isDirectory() || stat.dev !== this.dev || stat.ino !== this.ino) throw changed(this.path, "the directory was replaced");
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -2;
  }
}

function isSymlinkAt(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Opens the child directory `name` of `parent` without following a symlink. Throws NOT_FOUND, NOT_A_DIRECTORY or
 * PATH_CHANGED (the child is a symlink: a resolved real path never contains one, so the tree changed).
 */
export function openChildDir(parent: DirHandle, name: string): DirHandle {
  const childPath = path.join(parent.path, name);
  if (safeFsMode() === "proc") {
    const p = parent.at(name);
    try {
      return DirHandle.fromFd(childPath, fs.openSync(p, DIR_FLAGS));
    } catch (error) {
      const errno = (error as NodeJS.ErrnoException).code;
      if ((errno === "ENOTDIR" || errno === "ELOOP") && isSymlinkAt(p)) throw changed(childPath, "a directory became a symlink");
      throw fromFsError(error, childPath, "open directory");
    }
  }
  let stat: Stats;
  try {
    stat = fs.lstatSync(parent.at(name));
  } catch (error) {
    throw fromFsError(error, childPath, "open directory");
  }
  if (stat.isSymbolicLink()) throw changed(childPath, "a directory became a symlink");
  if (!stat.isDirectory()) throw new ToolError("NOT_A_DIRECTORY", `${JSON.stringify(childPath)} is not a directory`, { path: childPath });
  return DirHandle.fromIdentity(childPath, stat);
}

function openRoot(scope: Scope, root: string): DirHandle {
  if (safeFsMode() === "proc") {
    let fd: number;
    try {
      fd = fs.openSync(root, DIR_FLAGS);
    } catch (error) {
      throw fromFsError(error, root, "open root");
    }
    let actual: string;
    try {
      actual = fs.readlinkSync(`/proc/self/fd/${fd}`);
    } catch (error) {
      fs.closeSync(fd);
      throw fromFsError(error, root, "verify root");
    }
    if (actual !== root) {
      fs.closeSync(fd);
      throw changed(root, "the root is no longer where it was");
    }
    return DirHandle.fromFd(root, fd);
  }
  let stat: Stats;
  try {
    stat = fs.lstatSync(root);
  } catch (error) {
    throw fromFsError(error, root, "open root");
  }
  if (!stat.isDirectory() || !scope.roots.includes(root)) throw changed(root, "the root is no longer a directory");
  return DirHandle.fromIdentity(root, stat);
}

export interface OpenDirOptions {
  /** Create missing directories (mkdir -p); `created` collects the real paths made. */
  create?: boolean;
  created?: string[];
  mode?: number;
}

/**
 * Opens the directory at `realPath` (a path from `scope.resolve`) by descending from its root, one verified
 * component at a time; with `create`, makes the missing ones on the way.
 */
export function openDirInScope(scope: Scope, realPath: string, opts: OpenDirOptions = {}): DirHandle {
  const root = scope.rootOf(realPath);
  if (root === undefined) {
    throw new ToolError("OUTSIDE_ROOTS", `Path ${JSON.stringify(realPath)} is outside the allowed roots (${scope.roots.join(", ")})`, { path: realPath });
  }
  const parts = relativeWithin(root, realPath).split("/").filter(Boolean);
  let dir = openRoot(scope, root);
  try {
    for (const part of parts) {
      let child: DirHandle;
      try {
        child = openChildDir(dir, part);
      } catch (error) {
        if (!(opts.create && error instanceof ToolError && error.code === "NOT_FOUND")) throw error;
        try {
          fs.mkdirSync(dir.at(part), opts.mode ?? 0o777);
          opts.created?.push(path.join(dir.path, part));
        } catch (mkdirError) {
          if ((mkdirError as NodeJS.ErrnoException).code !== "EEXIST") throw fromFsError(mkdirError, path.join(dir.path, part), "create directory");
        }
        child = openChildDir(dir, part);
      }
      dir.close();
      dir = child;
    }
    if (safeFsMode() === "proc") {
      // Descending with O_NOFOLLOW already pins every step; this is the last word on where we ended up.
      const actual = fs.readlinkSync(dir.self());
      if (actual !== realPath) throw changed(realPath, "the directory is not where it was resolved");
    }
    return dir;
  } catch (error) {
    dir.close();
    throw error;
  }
}

/** The directory holding `realPath` and the final name; a root itself has no parent inside the scope. */
export function parentAndName(scope: Scope, realPath: string): { parent: string; name: string } {
  if (scope.roots.includes(realPath)) {
    throw new ToolError("REFUSED", `${JSON.stringify(realPath)} is an allowed root; this operation is not allowed on a root itself`, { path: realPath });
  }
  return { parent: path.dirname(realPath), name: path.basename(realPath) };
}

export function withDir<T>(scope: Scope, realDir: string, fn: (dir: DirHandle) => T, opts?: OpenDirOptions): T {
  const dir = openDirInScope(scope, realDir, opts);
  let async = false;
  try {
    const result = fn(dir);
    if (result instanceof Promise) {
      async = true;
      return result.finally(() => dir.close()) as T;
    }
    return result;
  } finally {
    if (!async) dir.close();
  }
}

export type EntryType = "file" | "directory" | "symlink" | "fifo" | "socket" | "block-device" | "char-device" | "unknown";

export function typeOfStats(stat: Stats | BigIntStats): EntryType {
  if (stat.isFile()) return "file";
  if (stat.isDirectory()) return "directory";
  if (stat.isSymbolicLink()) return "symlink";
  if (stat.isFIFO()) return "fifo";
  if (stat.isSocket()) return "socket";
  if (stat.isBlockDevice()) return "block-device";
  if (stat.isCharacterDevice()) return "char-device";
  return "unknown";
}

export function typeOfDirent(entry: Dirent): EntryType {
  if (entry.isFile()) return "file";
  if (entry.isDirectory()) return "directory";
  if (entry.isSymbolicLink()) return "symlink";
  if (entry.isFIFO()) return "fifo";
  if (entry.isSocket()) return "socket";
  if (entry.isBlockDevice()) return "block-device";
  if (entry.isCharacterDevice()) return "char-device";
  return "unknown";
}

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
    if (errno === "ELOOP" || (errno === "ENOTDIR" && isSymlinkAt(p))) throw changed(shown, "the file is a symlink now");
    throw fromFsError(error, shown, "open");
  }
  try {
    const stat = fs.fstatSync(fd);
    refuseNonRegular(stat, shown);
    if (before) {
      if (before.dev !== stat.dev || before.ino !== stat.ino) throw changed(shown, "the file was replaced while opening it");
      // No handle path to ask for: re-resolve the name now and require it to still be this very file.
      let again: Stats;
      try {
        if (fs.realpathSync.native(shown) !== shown) throw new Error("moved");
        again = fs.lstatSync(shown);
      } catch {
        throw changed(shown, "the path no longer leads to the opened file");
      }
      if (again.dev !== stat.dev || again.ino !== stat.ino) throw changed(shown, "the path no longer leads to the opened file");
    }
    if (opts.verifyPath !== false && safeFsMode() === "proc") {
      const actual = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (actual !== shown) throw changed(shown, "the opened file is not at the checked path");
    }
    return { fd, stat, path: shown };
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
}

function refuseNonRegular(stat: Stats, shown: string): void {
  if (stat.isFile()) return;
  const type = typeOfStats(stat);
  if (type === "directory") throw new ToolError("IS_A_DIRECTORY", `${JSON.stringify(shown)} is a directory`, { path: shown });
  if (type === "symlink") throw changed(shown, "the file is a symlink now");
  throw new ToolError("SPECIAL_FILE", `${JSON.stringify(shown)} is a ${type}, not a regular file; it is never read`, { path: shown, type });
}

/** Opens a regular file named by a real path from `scope.resolve`. */
export function openFileInScope(scope: Scope, realPath: string): OpenedFile {
  if (scope.roots.includes(realPath)) throw new ToolError("IS_A_DIRECTORY", `${JSON.stringify(realPath)} is a directory`, { path: realPath });
  const { parent, name } = parentAndName(scope, realPath);
  return withDir(scope, parent, (dir) => openFileIn(dir, name));
}

/** lstat of `name` in `dir`, or undefined when it does not exist. */
export function lstatIn(dir: DirHandle, name: string): Stats | undefined {
  try {
    return fs.lstatSync(dir.at(name));
  } catch (error) {
    const errno = (error as NodeJS.ErrnoException).code;
    if (errno === "ENOENT") return undefined;
    throw fromFsError(error, path.join(dir.path, name), "stat");
  }
}

export function bigStatIn(dir: DirHandle, name: string): BigIntStats | undefined {
  try {
    return fs.lstatSync(dir.at(name), { bigint: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw fromFsError(error, path.join(dir.path, name), "stat");
  }
}

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
export async function writeFileAtomic(
  dir: DirHandle,
  name: string,
  fill: (fd: number) => Promise<void> | void,
  opts: AtomicWriteOptions = {},
): Promise<void> {
  const shown = path.join(dir.path, name);
  const temp = `.tether-${randomBytes(9).toString("hex")}.tmp`;
  let fd: number;
  try {
    fd = fs.openSync(dir.at(temp), C.O_WRONLY | C.O_CREAT | C.O_EXCL | O_NOFOLLOW, opts.mode ?? 0o666);
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
    const current = bigStatIn(dir, name);
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

export function splitRootRelative(scope: Scope, realPath: string): string[] {
  const root = scope.rootOf(realPath);
  return root === undefined ? splitAbsolute(realPath).parts : relativeWithin(root, realPath).split("/").filter(Boolean);
}
