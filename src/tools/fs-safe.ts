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
import fs, { type BigIntStats, type Dirent, type Stats } from "node:fs";
import path from "node:path";
import { ToolError, fromFsError } from "./errors.js";
import { relativeWithin } from "./paths.js";
import type { Scope } from "./scope.js";

const C = fs.constants;
const O_DIRECTORY = C.O_DIRECTORY ?? 0;
const O_NOFOLLOW = C.O_NOFOLLOW ?? 0;
const DIR_FLAGS = C.O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

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

/** The tree changed under an operation (a name became a symlink, a directory moved): nothing was done. */
export function pathChanged(shownPath: string, why: string): ToolError {
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
      throw pathChanged(this.path, "the directory disappeared");
    }
    if (!stat.isDirectory() || stat.dev !== this.dev || stat.ino !== this.ino) throw pathChanged(this.path, "the directory was replaced");
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -2;
  }
}

export function isSymlinkAt(p: string): boolean {
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
      if ((errno === "ENOTDIR" || errno === "ELOOP") && isSymlinkAt(p)) throw pathChanged(childPath, "a directory became a symlink");
      throw fromFsError(error, childPath, "open directory");
    }
  }
  let stat: Stats;
  try {
    stat = fs.lstatSync(parent.at(name));
  } catch (error) {
    throw fromFsError(error, childPath, "open directory");
  }
  if (stat.isSymbolicLink()) throw pathChanged(childPath, "a directory became a symlink");
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
      throw pathChanged(root, "the root is no longer where it was");
    }
    return DirHandle.fromFd(root, fd);
  }
  let stat: Stats;
  try {
    stat = fs.lstatSync(root);
  } catch (error) {
    throw fromFsError(error, root, "open root");
  }
  if (!stat.isDirectory() || !scope.roots.includes(root)) throw pathChanged(root, "the root is no longer a directory");
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
      if (actual !== realPath) throw pathChanged(realPath, "the directory is not where it was resolved");
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

/** What an lstat result or a directory entry is (both answer the same questions). */
export function entryTypeOf(entry: Stats | BigIntStats | Dirent): EntryType {
  if (entry.isFile()) return "file";
  if (entry.isDirectory()) return "directory";
  if (entry.isSymbolicLink()) return "symlink";
  if (entry.isFIFO()) return "fifo";
  if (entry.isSocket()) return "socket";
  if (entry.isBlockDevice()) return "block-device";
  if (entry.isCharacterDevice()) return "char-device";
  return "unknown";
}

/** lstat of `name` in `dir` (with `bigint`, to the nanosecond), or undefined when it does not exist. */
export function lstatIn(dir: DirHandle, name: string): Stats | undefined;
export function lstatIn(dir: DirHandle, name: string, opts: { bigint: true }): BigIntStats | undefined;
export function lstatIn(dir: DirHandle, name: string, opts?: { bigint: true }): Stats | BigIntStats | undefined {
  try {
    return opts ? fs.lstatSync(dir.at(name), opts) : fs.lstatSync(dir.at(name));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw fromFsError(error, path.join(dir.path, name), "stat");
  }
}
