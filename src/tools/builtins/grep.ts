import { Type } from "@sinclair/typebox";
import fs from "node:fs";
import path from "node:path";
import { defineLocalTool, type ToolContext } from "../define.js";
import { ToolError } from "../errors.js";
import { openDirInScope, type DirHandle } from "../fs-safe.js";
import { openFileIn, readHeadSync } from "../safe-read.js";
import { LineMatcher } from "../line-matcher.js";
import { hasNulByte, truncateUtf8 } from "../text.js";
import { walkTree } from "../walk.js";
import { DEFAULT_SKIPPED_DIRS, LIMITS, compileGlob, lstatInScope, notFound, optionalPathField, toArray, flagField, patternField } from "./common.js";

const BATCH_FILES = 256;
const BATCH_BYTES = 4 * 1024 * 1024;
/** Time a user regex may spend over one whole search before it is stopped. */
export const GREP_REGEX_BUDGET_MS = 10_000;

type GrepMatch = {
  path: string;
  line: number;
  column: number;
  /** The match's length from `column` (UTF-16 code units, as columns are), so a reader can mark exactly it. */
  matchLength: number;
  text?: string;
  before?: string[];
  after?: string[];
  textTruncated?: boolean;
  textStartColumn?: number;
  omittedBytes?: number;
};

const globList = Type.Union([Type.String({ minLength: 1, maxLength: 1000 }), Type.Array(Type.String({ minLength: 1, maxLength: 1000 }), { maxItems: 50 })]);

function lineCut(line: string, column: number): { text: string; start: number; omitted: number } {
  const limit = LIMITS.grepLineBytes;
  if (line.length <= limit / 4 || Buffer.byteLength(line) <= limit) return { text: line, start: 0, omitted: 0 };
  // Long (often minified) lines: show the stretch around the match rather than the line's first kilobyte.
  const start = column < 256 ? 0 : column - 128;
  const cut = truncateUtf8(line.slice(start), limit);
  return { text: cut.text, start, omitted: Buffer.byteLength(line) - Buffer.byteLength(cut.text) };
}

function contextLine(line: string): string {
  return truncateUtf8(line.endsWith("\r") ? line.slice(0, -1) : line, LIMITS.grepLineBytes).text;
}

export const grepTool = defineLocalTool({
  name: "grep",
  description:
    "Search file contents line by line for a regular expression (JavaScript syntax) or, with literal: true, a plain string. Options: ignoreCase, context (lines before and after), include and exclude globs (a pattern without '/' matches file names at any depth). Binary files are skipped, and so are .git and node_modules unless includeIgnored is true. Returns at most 200 matches, each line cut to 1 KB, and reports how many matches were left out.",
  input: Type.Object(
    {
      pattern: patternField("Regular expression, or text when literal is true"),
      path: optionalPathField("File or folder to search (default: the first root)"),
      literal: flagField(false, "Treat pattern as plain text"),
      ignoreCase: flagField(false),
      context: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, default: 0, description: "Lines of context before and after each match" })),
      include: Type.Optional(globList),
      exclude: Type.Optional(globList),
      includeIgnored: flagField(false, "Also search .git and node_modules"),
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.grepMatches, default: LIMITS.grepMatches })),
      regexTimeoutMs: Type.Optional(
        Type.Integer({
          minimum: 1,
          maximum: GREP_REGEX_BUDGET_MS,
          default: GREP_REGEX_BUDGET_MS,
          description: "Time the regular expression may run in total before the search stops",
        }),
      ),
    },
    { additionalProperties: false },
  ),
  class: "read",
  async run(input, ctx) {
    return grep(input, ctx);
  },
});

interface GrepInput {
  pattern: string;
  path?: string;
  literal?: boolean;
  ignoreCase?: boolean;
  context?: number;
  include?: string | string[];
  exclude?: string | string[];
  includeIgnored?: boolean;
  limit?: number;
  regexTimeoutMs?: number;
}

type SkipCounts = { binary: number; tooLarge: number; special: number; symlinks: number; unreadable: number };

async function grep(input: GrepInput, ctx: ToolContext) {
  const budgetMs = input.regexTimeoutMs ?? GREP_REGEX_BUDGET_MS;
  const matcher = new LineMatcher({ pattern: input.pattern, literal: input.literal ?? false, ignoreCase: input.ignoreCase ?? false, budgetMs });
  const limit = input.limit ?? LIMITS.grepMatches;
  const search = new GrepSearch(matcher, limit, input.context ?? 0);
  const filter: FileFilter = {
    includes: toArray(input.include).map((p) => compileGlob(p, "include", { dot: true, basename: true })),
    excludes: toArray(input.exclude).map((p) => compileGlob(p, "exclude", { dot: true, basename: true })),
  };

  const base = await ctx.scope.resolve(input.path ?? ".");
  const stat = lstatInScope(ctx.scope, base);
  if (!stat) throw notFound(input.path ?? ".");
  let unreadableDirectories = 0;
  if (stat.isDirectory()) unreadableDirectories = await searchFolder(ctx, base, search, filter, input.includeIgnored ?? false);
  else searchOneFile(ctx, base, search, filter, input.path);

  const { counts, matches, omittedMatches } = search;
  return {
    path: base,
    pattern: input.pattern,
    literal: input.literal ?? false,
    ignoreCase: input.ignoreCase ?? false,
    count: matches.length,
    truncated: omittedMatches > 0,
    limit,
    omittedMatches,
    lineLimitBytes: LIMITS.grepLineBytes,
    filesSearched: search.filesSearched,
    filesMatched: search.filesMatched,
    skipped: { ...counts, unreadable: counts.unreadable + unreadableDirectories },
    matches,
  };
}

interface FileFilter {
  includes: Array<(rel: string) => boolean>;
  excludes: Array<(rel: string) => boolean>;
}

/** Walks the folder, searching every file the filter keeps; returns how many folders could not be read. */
async function searchFolder(ctx: ToolContext, base: string, search: GrepSearch, filter: FileFilter, includeIgnored: boolean): Promise<number> {
  const dir = openDirInScope(ctx.scope, base);
  try {
    const walked = await walkTree(dir, {
      recursive: true,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
      descend: (entry) => (includeIgnored || !DEFAULT_SKIPPED_DIRS.has(entry.name)) && !filter.excludes.some((m) => m(entry.rel)),
      visit: (entry) => {
        if (entry.type === "file") search.consider(entry.dir, entry.name, entry.rel, filter);
        else if (entry.type === "symlink") search.counts.symlinks++;
        else if (entry.type !== "directory") search.counts.special++;
      },
    });
    search.flush();
    return walked.unreadable;
  } finally {
    dir.close();
  }
}

/** A path naming one file: searched like a folder's file, but one that is not a regular file is an error, not a skip. */
function searchOneFile(ctx: ToolContext, base: string, search: GrepSearch, filter: FileFilter, asGiven: string | undefined): void {
  const dir = openDirInScope(ctx.scope, path.dirname(base));
  try {
    const name = path.basename(base);
    const before = search.counts.special;
    search.consider(dir, name, name, filter);
    search.flush();
    if (search.counts.special > before) throw new ToolError("SPECIAL_FILE", `${JSON.stringify(asGiven)} is not a regular file`, { path: base });
  } finally {
    dir.close();
  }
}

/**
 * One search's state: files are read and queued in batches (the matcher runs a batch at a time, under
 * one regex budget), and their matches collected up to the limit; the rest only counted.
 */
class GrepSearch {
  readonly matches: GrepMatch[] = [];
  omittedMatches = 0;
  filesSearched = 0;
  filesMatched = 0;
  readonly counts: SkipCounts = { binary: 0, tooLarge: 0, special: 0, symlinks: 0, unreadable: 0 };
  private batch: { rel: string; text: string }[] = [];
  private batchBytes = 0;

  constructor(
    private readonly matcher: LineMatcher,
    private readonly limit: number,
    private readonly contextLines: number,
  ) {}

  /** A file the walk found: read and queued for matching, or counted as skipped. */
  consider(dir: DirHandle, name: string, rel: string, filter: FileFilter): void {
    if (filter.includes.length && !filter.includes.some((m) => m(rel))) return;
    if (filter.excludes.some((m) => m(rel))) return;
    const bytes = readWhole(dir, name, this.counts);
    if (!bytes) return;
    if (hasNulByte(bytes)) {
      this.counts.binary++;
      return;
    }
    this.filesSearched++;
    // Files without the literal's bytes are never decoded.
    if (this.matcher.literalBytes && bytes.indexOf(this.matcher.literalBytes) === -1) return;
    this.batch.push({ rel, text: bytes.toString("utf8") });
    this.batchBytes += bytes.length;
    if (this.batch.length >= BATCH_FILES || this.batchBytes >= BATCH_BYTES) this.flush();
  }

  /** Runs the matcher over the queued files. */
  flush(): void {
    if (this.batch.length === 0) return;
    const results = this.matcher.match(
      this.batch.map((f) => f.text),
      Math.max(0, this.limit - this.matches.length),
    );
    results.forEach((result, i) => {
      if (result.total === 0) return;
      this.filesMatched++;
      const file = this.batch[i]!;
      const lines = file.text.split("\n");
      let returned = 0;
      for (let h = 0; h < result.hits.length && this.matches.length < this.limit; h += 2) {
        this.matches.push(
          matchAt(file.rel, lines, { index: result.hits[h]!, column: result.hits[h + 1]!, length: result.lengths[h / 2] ?? 0 }, this.contextLines),
        );
        returned++;
      }
      this.omittedMatches += result.total - returned;
    });
    this.batch = [];
    this.batchBytes = 0;
  }
}

/** A file's bytes, or undefined (counted) when it is special, too large or unreadable. */
function readWhole(dir: DirHandle, name: string, counts: SkipCounts): Buffer | undefined {
  let file;
  try {
    file = openFileIn(dir, name, { verifyPath: false });
  } catch (error) {
    if (error instanceof ToolError && error.code === "SPECIAL_FILE") counts.special++;
    else counts.unreadable++;
    return undefined;
  }
  try {
    if (file.stat.size > LIMITS.grepFileBytes) {
      counts.tooLarge++;
      return undefined;
    }
    return file.stat.size === 0 ? Buffer.alloc(0) : readHeadSync(file.fd, file.stat.size, file.stat.size);
  } catch {
    counts.unreadable++;
    return undefined;
  } finally {
    fs.closeSync(file.fd);
  }
}

/** The match on line `index` (0-based) at `column`, `length` long: its line, cut to the limit, and its context lines. */
function matchAt(rel: string, lines: string[], hit: { index: number; column: number; length: number }, contextLines: number): GrepMatch {
  const { index, column } = hit;
  const raw = lines[index] ?? "";
  const cut = lineCut(raw.endsWith("\r") ? raw.slice(0, -1) : raw, column);
  const match: GrepMatch = { path: rel, line: index + 1, column: column + 1, matchLength: hit.length, text: cut.text };
  if (cut.omitted > 0) Object.assign(match, { textTruncated: true, textStartColumn: cut.start + 1, omittedBytes: cut.omitted });
  if (contextLines > 0) {
    match.before = lines.slice(Math.max(0, index - contextLines), index).map(contextLine);
    match.after = lines.slice(index + 1, index + 1 + contextLines).map(contextLine);
    if (index + 1 + contextLines >= lines.length && lines[lines.length - 1] === "") match.after = match.after.slice(0, lines.length - 2 - index);
  }
  return match;
}
