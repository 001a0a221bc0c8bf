/** Limits, schema fragments and helpers the built-in tools share. */
import { Type, type Static } from "@sinclair/typebox";
import fs, { type Stats } from "node:fs";
import path from "node:path";
import { definePlannedTool, type LocalTool, type PlanResult, type ToolContext } from "../define.js";
import { ToolError } from "../errors.js";
import { compileGlobMatcher, type GlobMatcher } from "../glob-match.js";
import { DirHandle, openDirInScope } from "../fs-safe.js";
import { readHeadSync } from "../safe-read.js";
import { MAX_PATH_LENGTH } from "../paths.js";
import type { Scope } from "../scope.js";
import { isBinaryContent } from "../text.js";

export const LIMITS = {
  /** list_directory entries returned. */
  listEntries: 1000,
  /** glob matches returned. */
  globMatches: 1000,
  /** grep matches returned. */
  grepMatches: 200,
  /** Bytes of each grep line (match or context) returned. */
  grepLineBytes: 1024,
  /** Files larger than this are not searched by grep. */
  grepFileBytes: 32 * 1024 * 1024,
  /** read_file content returned. */
  readBytes: 1024 * 1024,
  /** Largest file write_file, edit_file and append_file read or write (a diff of more is not reviewable). */
  textFileBytes: 10 * 1024 * 1024,
  /** Entries a plan lists (copy, delete). */
  planEntries: 1000,
  /** Entries walked just to count what was left out; past this counts are lower bounds. */
  countEntries: 1_000_000,
} as const;

/** Directories that hold tools' data, not the user's: skipped unless asked for. */
export const DEFAULT_SKIPPED_DIRS: ReadonlySet<string> = new Set([".git", "node_modules"]);

export const pathField = (description: string) => Type.String({ minLength: 1, maxLength: MAX_PATH_LENGTH, description });
export const optionalPathField = (description: string) => Type.Optional(Type.String({ minLength: 1, maxLength: MAX_PATH_LENGTH, default: ".", description }));
/** An optional boolean input and the value it takes when left out. */
export const flagField = (byDefault: boolean, description?: string) =>
  Type.Optional(Type.Boolean({ default: byDefault, ...(description ? { description } : {}) }));
/** A glob or regular expression from the model (glob, grep). */
export const patternField = (description: string) => Type.String({ minLength: 1, maxLength: 1000, description });

/** copy's and move's input: a source, the full destination path, and the same two switches. */
const transferInput = (from: string, to: string) =>
  Type.Object(
    {
      from: pathField(from),
      to: pathField(to),
      overwrite: flagField(false, "Replace an existing destination file"),
      createParents: flagField(true, "Create missing parent folders of the destination"),
    },
    { additionalProperties: false },
  );
export type TransferInput = Static<ReturnType<typeof transferInput>>;

/** copy and move: planned tools on that input. */
export function transferTool(
  def: { name: string; from: string; to: string; run: (input: TransferInput, ctx: ToolContext, apply: boolean) => Promise<PlanResult> },
  description: string,
): LocalTool {
  return definePlannedTool({ name: def.name, description, input: transferInput(def.from, def.to), run: def.run });
}

export function isoTime(ms: number): string {
  return new Date(Number.isFinite(ms) ? ms : 0).toISOString();
}

export function modeString(mode: number): string {
  return `0${(mode & 0o7777).toString(8).padStart(3, "0")}`;
}

/** Globs from the model go through our own matcher: regex-based ones can be made to backtrack for seconds. */
export function compileGlob(pattern: string, field: string, opts: { dot?: boolean; basename?: boolean } = {}): GlobMatcher {
  return compileGlobMatcher(pattern, field, opts);
}

export function toArray(value: string | readonly string[] | undefined): string[] {
  if (value === undefined) return [];
  return typeof value === "string" ? [value] : [...value];
}

/** An existing path's lstat, through its verified parent (or the root handle for a root). */
export function lstatInScope(scope: Scope, real: string): Stats | undefined {
  if (scope.roots.includes(real)) {
    const dir = openDirInScope(scope, real);
    try {
      return dir.stat();
    } finally {
      dir.close();
    }
  }
  let dir: DirHandle;
  try {
    dir = openDirInScope(scope, path.dirname(real));
  } catch (error) {
    if (error instanceof ToolError && (error.code === "NOT_FOUND" || error.code === "NOT_A_DIRECTORY")) return undefined;
    throw error;
  }
  try {
    return fs.lstatSync(dir.at(path.basename(real)));
  } catch (error) {
    const errno = (error as NodeJS.ErrnoException).code;
    if (errno === "ENOENT" || errno === "ENOTDIR") return undefined;
    throw error;
  } finally {
    dir.close();
  }
}

export function notFound(shown: string): ToolError {
  return new ToolError("NOT_FOUND", `${JSON.stringify(shown)} does not exist`, { path: shown });
}

/**
 * The existing directories a write would have to create, nearest first to furthest: walks up from `real`'s parent
 * until something exists.
 */
export function missingAncestors(scope: Scope, real: string): string[] {
  const missing: string[] = [];
  let dir = path.dirname(real);
  for (;;) {
    const stat = scope.contains(dir) ? lstatInScope(scope, dir) : undefined;
    if (stat) {
      // The nearest thing that exists must be a folder, or nothing can be created beneath it.
      if (!stat.isDirectory()) throw new ToolError("NOT_A_DIRECTORY", `${JSON.stringify(dir)} is not a folder`, { path: dir });
      return missing;
    }
    if (!scope.contains(dir)) return missing;
    missing.unshift(dir);
    const up = path.dirname(dir);
    if (up === dir) return missing;
    dir = up;
  }
}

/** Reads a whole regular file (already opened) of at most `max` bytes as UTF-8 text, or says why not. */
export function readTextFd(fd: number, size: number, shown: string, max: number = LIMITS.textFileBytes): { text: string; bytes: Buffer } {
  if (size > max) {
    throw new ToolError("FILE_TOO_LARGE", `${JSON.stringify(shown)} is ${size} bytes; this tool handles files up to ${max} bytes`, {
      path: shown,
      size,
      limit: max,
    });
  }
  const bytes = readHeadSync(fd, size + 1);
  if (bytes.length > max) throw new ToolError("FILE_TOO_LARGE", `${JSON.stringify(shown)} grew past ${max} bytes`, { path: shown, limit: max });
  if (isBinaryContent(bytes)) throw new ToolError("BINARY_FILE", `${JSON.stringify(shown)} is not a UTF-8 text file`, { path: shown });
  return { text: bytes.toString("utf8"), bytes };
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** Permission bits kept across a rewrite; set-id and sticky bits are dropped on purpose. */
export function keptMode(stat: { mode: number | bigint }): number {
  return Number(stat.mode) & 0o777;
}
