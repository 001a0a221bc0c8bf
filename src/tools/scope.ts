/**
 * Scope: the set of allowed roots, and the one place that turns a caller's path into a real path inside them.
 *
 * Resolution follows kernel semantics, not string semantics: every symlink is expanded where it occurs and `..`
 * applies to the real directory reached so far, exactly as open(2) would walk it. The result is then compared with
 * the roots component by component. A path that does not exist yet resolves through its nearest existing ancestor;
 * its missing tail cannot contain a symlink (it does not exist), so it is appended lexically.
 *
 * Resolving is a check, not a guarantee: the tree can change before the path is used. `fs-safe.ts` re-verifies
 * what it actually opens, so a path resolved here is only ever used through it.
 */
import fs, { promises as fsp } from "node:fs";
import path from "node:path";
import { ToolError } from "./errors.js";
import { checkPathSyntax, currentFlavor, isWithin, joinAbsolute, separatorOf, splitAbsolute, type PathFlavor, type SplitPath } from "./paths.js";
import { isList } from "./validate.js";

export interface ResolveOptions {
  /**
   * Follow a symlink in the final component (default true). Link-level operations (stat, delete, move) pass
   * false so they act on the link itself; the directory holding it is still fully resolved.
   */
  followFinal?: boolean;
}

export interface Scope {
  /** Real, absolute paths of the allowed roots; relative paths resolve against the first. */
  readonly roots: readonly string[];
  /** Resolves a caller's path to a real absolute path inside a root, or throws OUTSIDE_ROOTS / INVALID_PATH. */
  resolve(path: string, opts?: ResolveOptions): Promise<string>;
  /** True when an already-real path lies inside a root. */
  contains(realPath: string): boolean;
  /** The deepest root containing an already-real path. */
  rootOf(realPath: string): string | undefined;
}

/** Linux's own limit on symlink expansions in one lookup. */
const MAX_SYMLINKS = 40;

export async function createScope(roots: readonly string[]): Promise<Scope> {
  const flavor = currentFlavor();
  if (!isList(roots) || roots.length === 0) throw new ToolError("INVALID_ROOT", "A scope needs at least one root directory");
  const real: string[] = [];
  for (const root of roots) {
    try {
      checkPathSyntax(root, flavor);
    } catch (error) {
      throw new ToolError("INVALID_ROOT", `Invalid root: ${(error as Error).message}`, { root });
    }
    let resolved: string;
    try {
      resolved = await fsp.realpath(path.resolve(root));
    } catch (error) {
      const errno = (error as NodeJS.ErrnoException).code;
      throw new ToolError("INVALID_ROOT", `Root ${JSON.stringify(root)} ${errno === "ENOENT" ? "does not exist" : `cannot be resolved (${errno})`}`, {
        root,
        errno,
      });
    }
    const stat = await fsp.stat(resolved);
    if (!stat.isDirectory()) throw new ToolError("INVALID_ROOT", `Root ${JSON.stringify(root)} is not a directory`, { root });
    if (!real.includes(resolved)) real.push(resolved);
  }
  return new RootScope(Object.freeze(real), flavor);
}

class RootScope implements Scope {
  constructor(
    readonly roots: readonly string[],
    private readonly flavor: PathFlavor,
  ) {
    Object.freeze(this);
  }

  contains(realPath: string): boolean {
    return this.rootOf(realPath) !== undefined;
  }

  rootOf(realPath: string): string | undefined {
    let best: string | undefined;
    for (const root of this.roots) {
      if (isWithin(root, realPath, this.flavor) && (best === undefined || root.length > best.length)) best = root;
    }
    return best;
  }

  async resolve(input: string, opts: ResolveOptions = {}): Promise<string> {
    checkPathSyntax(input, this.flavor);
    const p = path[this.flavor];
    // A raw join, not path.resolve: `..` must apply after symlinks are expanded, as the kernel applies it.
    const absolute = p.isAbsolute(input) ? input : this.roots[0] + separatorOf(this.flavor) + input;
    const real = await resolveReal(absolute, opts.followFinal ?? true, this.flavor);
    if (!this.contains(real)) {
      // The resolved path is deliberately left out: it would describe the tree outside the roots.
      throw new ToolError("OUTSIDE_ROOTS", `Path ${JSON.stringify(input)} is outside the allowed roots (${this.roots.join(", ")})`, {
        path: input,
        roots: this.roots,
      });
    }
    return real;
  }
}

async function resolveReal(absolute: string, followFinal: boolean, flavor: PathFlavor): Promise<string> {
  const p = path[flavor];
  const trailingSeparator = /[\\/]$/.test(absolute) && (flavor === "win32" || !absolute.endsWith("\\"));
  const base = p.basename(absolute);
  if (!followFinal && !trailingSeparator && base !== "." && base !== ".." && base !== "") {
    const parent = await resolveReal(p.dirname(absolute), true, flavor);
    return p.join(parent, base);
  }
  try {
    // realpath(3) does the whole walk in one call when everything exists; the walk below covers the rest.
    // Synchronous on purpose: a local path's realpath takes microseconds, less than the hand-off to
    // libuv's thread pool and back that the async call costs on every tool call (the tools' other
    // metadata calls, through fs-safe.ts, are synchronous already).
    return fs.realpathSync.native(absolute);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ELOOP") throw loopError(absolute);
  }
  return walkComponents(absolute, flavor);
}

function loopError(absolute: string): ToolError {
  return new ToolError("SYMLINK_LOOP", `Too many levels of symbolic links while resolving a path`, { reason: "ELOOP", path: absolute.slice(0, 200) });
}

function components(text: string, flavor: PathFlavor): string[] {
  return text.split(flavor === "win32" ? /[\\/]/ : "/").filter((c) => c !== "" && c !== ".");
}

/** Component-by-component resolution that tolerates a missing tail and dangling links. */
async function walkComponents(absolute: string, flavor: PathFlavor): Promise<string> {
  const p = path[flavor];
  const start = splitAbsolute(absolute, flavor);
  const current: SplitPath = { root: start.root, parts: [] };
  const queue = start.parts.slice();
  let missing = 0; // trailing components of `current` that do not exist
  let links = 0;
  while (queue.length > 0) {
    const part = queue.shift()!;
    if (part === "..") {
      // `current` is real up to its missing tail, so its lexical parent is its real parent.
      current.parts.pop();
      if (missing > 0) missing--;
      continue;
    }
    if (missing > 0) {
      current.parts.push(part);
      missing++;
      continue;
    }
    const next = joinAbsolute({ root: current.root, parts: [...current.parts, part] }, flavor);
    let isLink: boolean;
    try {
      isLink = (await fsp.lstat(next)).isSymbolicLink();
    } catch {
      // Missing, not a directory, or unreadable: the rest is lexical and the operation reports the real error.
      current.parts.push(part);
      missing = 1;
      continue;
    }
    if (!isLink) {
      current.parts.push(part);
      continue;
    }
    if (++links > MAX_SYMLINKS) throw loopError(absolute);
    let target: string;
    try {
      target = await fsp.readlink(next);
    } catch {
      current.parts.push(part); // replaced since the lstat; treat like a missing entry
      missing = 1;
      continue;
    }
    if (p.isAbsolute(target)) {
      const split = splitAbsolute(flavor === "win32" ? target.replace(/^\\\\\?\\/, "") : target, flavor);
      current.root = split.root;
      current.parts = [];
    }
    queue.unshift(...components(target, flavor));
  }
  if (flavor === "win32" || process.platform === "darwin") {
    // Case-insensitive file systems: canonicalise the existing part so root comparison is exact.
    const existing = { root: current.root, parts: current.parts.slice(0, current.parts.length - missing) };
    try {
      const canonical = splitAbsolute(await fsp.realpath(joinAbsolute(existing, flavor)), flavor);
      current.root = canonical.root;
      current.parts = [...canonical.parts, ...current.parts.slice(current.parts.length - missing)];
    } catch {
      /* keep the lexical form; a mismatch can only make the root check stricter */
    }
  }
  return joinAbsolute(current, flavor);
}
