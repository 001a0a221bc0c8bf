/**
 * Tree walking for list_directory, glob, grep, disk_usage, copy and delete. Every directory is entered through
 * its parent's handle (`openChildDir`, O_NOFOLLOW), so a symlinked directory is listed as a symlink and never
 * descended into, and a directory swapped for a symlink mid-walk is skipped rather than followed.
 *
 * The walk itself is synchronous per directory (small syscalls are much faster without the thread pool) and
 * yields to the event loop every few hundred entries, where it also honours the abort signal.
 */
import fs, { type Dirent } from "node:fs";
import { fromFsError, throwIfAborted } from "./errors.js";
import { DirHandle, openChildDir, entryTypeOf, type EntryType } from "./fs-safe.js";

export interface WalkEntry {
  name: string;
  /** Path relative to the walk's base, `/`-separated. */
  rel: string;
  type: EntryType;
  /** 1 for the base's own children. */
  depth: number;
  /** The directory holding the entry; valid only during the callback. */
  dir: DirHandle;
}

export interface WalkOptions {
  recursive: boolean;
  /** Deepest level entered (each level holds one open handle). */
  maxDepth?: number;
  signal?: AbortSignal;
  /** Whether to enter a directory; symlinks are never entered whatever this says. */
  descend?(entry: WalkEntry): boolean;
  /** Pre-order, children sorted by name. Return false to stop the walk. */
  visit(entry: WalkEntry): boolean | void;
}

export interface WalkStats {
  /** Directories not entered because they were deeper than maxDepth. */
  depthLimited: number;
  /** Directories that could not be opened or read (permissions, or they changed mid-walk). */
  unreadable: number;
  /** The visitor asked to stop. */
  stopped: boolean;
}

export const DEFAULT_MAX_DEPTH = 128;
const YIELD_EVERY = 512;

interface Frame {
  dir: DirHandle;
  entries: Dirent[];
  index: number;
  prefix: string;
  depth: number;
}

export function readSortedEntries(dir: DirHandle): Dirent[] {
  const entries = fs.readdirSync(dir.self(), { withFileTypes: true });
  // Fallback only (a no-op with handles): the listing must have come from the directory that was checked.
  dir.verify();
  // Code-unit order: stable across platforms and locales, so results are reproducible.
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return entries;
}

export async function walkTree(base: DirHandle, opts: WalkOptions): Promise<WalkStats> {
  const stats: WalkStats = { depthLimited: 0, unreadable: 0, stopped: false };
  const maxDepth = opts.maxDepth ?? DEFAULT_MAX_DEPTH;
  let baseEntries: Dirent[];
  try {
    baseEntries = readSortedEntries(base);
  } catch (error) {
    throw fromFsError(error, base.path, "list");
  }
  const frames: Frame[] = [{ dir: base, entries: baseEntries, index: 0, prefix: "", depth: 1 }];
  let counter = 0;
  try {
    while (frames.length > 0) {
      const frame = frames[frames.length - 1]!;
      if (frame.index >= frame.entries.length) {
        frames.pop();
        if (frame.dir !== base) frame.dir.close();
        continue;
      }
      const dirent = frame.entries[frame.index++]!;
      const entry: WalkEntry = {
        name: dirent.name,
        rel: frame.prefix + dirent.name,
        type: entryTypeOf(dirent),
        depth: frame.depth,
        dir: frame.dir,
      };
      if (opts.visit(entry) === false) {
        stats.stopped = true;
        break;
      }
      if (opts.recursive && entry.type === "directory" && (opts.descend?.(entry) ?? true)) {
        if (frame.depth >= maxDepth) {
          stats.depthLimited++;
        } else {
          let child: DirHandle | undefined;
          try {
            child = openChildDir(frame.dir, dirent.name);
            frames.push({ dir: child, entries: readSortedEntries(child), index: 0, prefix: `${entry.rel}/`, depth: frame.depth + 1 });
          } catch {
            child?.close();
            stats.unreadable++;
          }
        }
      }
      if (++counter % YIELD_EVERY === 0) {
        await new Promise((resolve) => setImmediate(resolve));
        throwIfAborted(opts.signal);
      }
    }
  } finally {
    for (const frame of frames) if (frame.dir !== base) frame.dir.close();
  }
  return stats;
}
