/** What write_file, edit_file and append_file share: reading the current file, and where to write. */
import fs from "node:fs";
import path from "node:path";
import { ToolError } from "../errors.js";
import { identityOf, writeAllSync, writeFileAtomic, type FileIdentity } from "../atomic-write.js";
import { lstatIn, openDirInScope, parentAndName, type DirHandle } from "../fs-safe.js";
import { openFileIn, readHeadSync } from "../safe-read.js";
import type { Scope } from "../scope.js";
import { isBinaryContent } from "../text.js";
import { LIMITS, keptMode, missingAncestors, notFound } from "./common.js";

export interface CurrentFile {
  size: number;
  nlink: number;
  mode: number;
  uid: number;
  gid: number;
  identity: FileIdentity;
  /** Set when the file is UTF-8 text within the size limit. */
  text?: string;
  kind: "text" | "binary" | "too-large";
}

/** The regular file `name` in `dir` as it is now, or undefined when nothing is there. */
export function readCurrent(dir: DirHandle, name: string): CurrentFile | undefined {
  const shown = path.join(dir.path, name);
  const stat = lstatIn(dir, name);
  if (!stat) return undefined;
  if (stat.isDirectory()) throw new ToolError("IS_A_DIRECTORY", `${JSON.stringify(shown)} is a directory`, { path: shown });
  if (stat.isSymbolicLink()) {
    // The resolved path's last component was not a link when it was resolved.
    throw new ToolError("PATH_CHANGED", `${JSON.stringify(shown)} became a symlink while it was being used; nothing was done`, { path: shown });
  }
  const file = openFileIn(dir, name);
  try {
    const big = fs.fstatSync(file.fd, { bigint: true });
    const current: CurrentFile = {
      size: file.stat.size,
      nlink: file.stat.nlink,
      mode: file.stat.mode,
      uid: file.stat.uid,
      gid: file.stat.gid,
      identity: identityOf(big),
      kind: "too-large",
    };
    if (file.stat.size <= LIMITS.textFileBytes) {
      const bytes = readHeadSync(file.fd, file.stat.size + 1);
      if (bytes.length > LIMITS.textFileBytes) current.kind = "too-large";
      else if (isBinaryContent(bytes)) current.kind = "binary";
      else {
        current.kind = "text";
        current.text = bytes.toString("utf8");
      }
    }
    return current;
  } finally {
    fs.closeSync(file.fd);
  }
}

export function requireText(current: CurrentFile | undefined, shown: string): asserts current is CurrentFile & { text: string } {
  if (!current) throw notFound(shown);
  if (current.kind === "too-large") {
    throw new ToolError("FILE_TOO_LARGE", `${JSON.stringify(shown)} is ${current.size} bytes; this tool edits files up to ${LIMITS.textFileBytes} bytes`, {
      path: shown,
      size: current.size,
      limit: LIMITS.textFileBytes,
    });
  }
  if (current.kind === "binary") throw new ToolError("BINARY_FILE", `${JSON.stringify(shown)} is not a UTF-8 text file`, { path: shown });
}

export interface WriteTarget {
  real: string;
  parent: string;
  name: string;
  /** Folders that do not exist yet, outermost first. */
  missing: string[];
}

export async function writeTarget(scope: Scope, input: string, createParents: boolean): Promise<WriteTarget> {
  const real = await scope.resolve(input);
  const { parent, name } = parentAndName(scope, real);
  const missing = missingAncestors(scope, real);
  if (missing.length > 0 && !createParents) {
    throw new ToolError("NOT_FOUND", `The folder ${JSON.stringify(missing[0])} does not exist (set createParents to create it)`, { path: missing[0] });
  }
  return { real, parent, name, missing };
}

/** Runs `fn` with the target's folder open: without `create`, a missing folder means there is no file yet. */
export async function withTargetDir<T>(
  scope: Scope,
  target: WriteTarget,
  create: boolean,
  fn: (dir: DirHandle | undefined, created: string[]) => Promise<T> | T,
): Promise<T> {
  const created: string[] = [];
  if (!create && target.missing.length > 0) return fn(undefined, created);
  const dir = openDirInScope(scope, target.parent, { create, created });
  try {
    return await fn(dir, created);
  } finally {
    dir.close();
  }
}

/**
 * Writes `bytes` as `name` through `writeFileAtomic`. An existing file keeps its permissions and owner and, with
 * `unchangedSince`, must still be the file `current` read (FILE_CHANGED otherwise); a new one must still be absent.
 */
export function writeKeepingMode(
  dir: DirHandle,
  name: string,
  bytes: Buffer,
  current: CurrentFile | undefined,
  opts: { unchangedSince: boolean; signal?: AbortSignal | undefined },
): Promise<void> {
  const expect = current ? (opts.unchangedSince ? { expect: current.identity } : {}) : { expect: "absent" as const };
  return writeFileAtomic(dir, name, (fd) => writeAllSync(fd, bytes), {
    ...(current ? { mode: keptMode(current), owner: { uid: current.uid, gid: current.gid } } : {}),
    ...expect,
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
}

export function byteCount(n: number): string {
  return n === 1 ? "1 byte" : `${n} bytes`;
}

export function hardLinkNote(current: CurrentFile | undefined): string {
  return current && current.nlink > 1
    ? ` It has ${current.nlink} hard links: the new content replaces this name only, the other links keep the old content.`
    : "";
}
