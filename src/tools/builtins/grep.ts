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
import { DEFAULT_SKIPPED_DIRS, LIMITS, compileGlob, fenceFor, lstatInScope, notFound, optionalPathField, toArray, flagField, patternField } from "./common.js";

const BATCH_FILES = 256;
const BATCH_BYTES = 4 * 1024 * 1024;
/** Time a user regex may spend over one whole search before it is stopped. */
export const GREP_REGEX_BUDGET_MS = 10_000;

type GrepMatch = {
  path: string;
  line: number;
  column: number;
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
        Type.Integer({ minimum: 1, maximum: GREP_REGEX_BUDGET_MS, default: GREP_REGEX_BUDGET_MS, description: "Time the regular expression may run in total before the search stops" }),
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

async function grep(input: GrepInput, ctx: ToolContext) {
  const budgetMs = input.regexTimeoutMs ?? GREP_REGEX_BUDGET_MS;
  const matcher = new LineMatcher({ pattern: input.pattern, literal: input.literal ?? false, ignoreCase: input.ignoreCase ?? false, budgetMs });
  const includes = toArray(input.include).map((p) => compileGlob(p, "include", { dot: true, basename: true }));
  const excludes = toArray(input.exclude).map((p) => compileGlob(p, "exclude", { dot: true, basename: true }));
  const contextLines = input.context ?? 0;
  const limit = input.limit ?? LIMITS.grepMatches;
  const matches: GrepMatch[] = [];
  let omittedMatches = 0;
  const counts = { filesSearched: 0, filesMatched: 0, binary: 0, tooLarge: 0, special: 0, symlinks: 0, unreadable: 0 };
  let batch: { rel: string; text: string }[] = [];
  let batchBytes = 0;

  const flush = () => {
    if (batch.length === 0) return;
    const results = matcher.match(
      batch.map((f) => f.text),
      Math.max(0, limit - matches.length),
    );
    results.forEach((result, i) => {
      if (result.total === 0) return;
      counts.filesMatched++;
      const file = batch[i]!;
      const lines = file.text.split("\n");
      let returned = 0;
      for (let h = 0; h < result.hits.length && matches.length < limit; h += 2) {
        const index = result.hits[h]!;
        const column = result.hits[h + 1]!;
        const raw = lines[index] ?? "";
        const cut = lineCut(raw.endsWith("\r") ? raw.slice(0, -1) : raw, column);
        const match: GrepMatch = { path: file.rel, line: index + 1, column: column + 1, text: cut.text };
        if (cut.omitted > 0) Object.assign(match, { textTruncated: true, textStartColumn: cut.start + 1, omittedBytes: cut.omitted });
        if (contextLines > 0) {
          match.before = lines.slice(Math.max(0, index - contextLines), index).map(contextLine);
          match.after = lines.slice(index + 1, index + 1 + contextLines).map(contextLine);
          if (index + 1 + contextLines >= lines.length && lines[lines.length - 1] === "") match.after = match.after.slice(0, lines.length - 2 - index);
        }
        matches.push(match);
        returned++;
      }
      omittedMatches += result.total - returned;
    });
    batch = [];
    batchBytes = 0;
  };

  const consider = (dir: DirHandle, name: string, rel: string) => {
    if (includes.length && !includes.some((m) => m(rel))) return;
    if (excludes.some((m) => m(rel))) return;
    let file;
    try {
      file = openFileIn(dir, name, { verifyPath: false });
    } catch (error) {
      if (error instanceof ToolError && error.code === "SPECIAL_FILE") counts.special++;
      else counts.unreadable++;
      return;
    }
    let bytes: Buffer;
    try {
      if (file.stat.size > LIMITS.grepFileBytes) {
        counts.tooLarge++;
        return;
      }
      bytes = file.stat.size === 0 ? Buffer.alloc(0) : readHeadSync(file.fd, file.stat.size, file.stat.size);
    } catch {
      counts.unreadable++;
      return;
    } finally {
      fs.closeSync(file.fd);
    }
    if (hasNulByte(bytes)) {
      counts.binary++;
      return;
    }
    counts.filesSearched++;
    // Files without the literal's bytes are never decoded.
    if (matcher.literalBytes && bytes.indexOf(matcher.literalBytes) === -1) return;
    batch.push({ rel, text: bytes.toString("utf8") });
    batchBytes += bytes.length;
    if (batch.length >= BATCH_FILES || batchBytes >= BATCH_BYTES) flush();
  };

  const base = await ctx.scope.resolve(input.path ?? ".");
  const stat = lstatInScope(ctx.scope, base);
  if (!stat) throw notFound(input.path ?? ".");
  let unreadableDirectories = 0;
  if (stat.isDirectory()) {
    const dir = openDirInScope(ctx.scope, base);
    try {
      const walked = await walkTree(dir, {
        recursive: true,
        ...(ctx.signal ? { signal: ctx.signal } : {}),
        descend: (entry) => (input.includeIgnored || !DEFAULT_SKIPPED_DIRS.has(entry.name)) && !excludes.some((m) => m(entry.rel)),
        visit: (entry) => {
          if (entry.type === "file") consider(entry.dir, entry.name, entry.rel);
          else if (entry.type === "symlink") counts.symlinks++;
          else if (entry.type !== "directory") counts.special++;
        },
      });
      unreadableDirectories = walked.unreadable;
      flush();
    } finally {
      dir.close();
    }
  } else {
    const dir = openDirInScope(ctx.scope, path.dirname(base));
    try {
      const name = path.basename(base);
      const before = counts.special;
      consider(dir, name, name);
      flush();
      if (counts.special > before) throw new ToolError("SPECIAL_FILE", `${JSON.stringify(input.path)} is not a regular file`, { path: base });
    } finally {
      dir.close();
    }
  }

  const truncated = omittedMatches > 0;
  const common = {
    path: base,
    pattern: input.pattern,
    literal: input.literal ?? false,
    ignoreCase: input.ignoreCase ?? false,
    count: matches.length,
    truncated,
    limit,
    omittedMatches,
    lineLimitBytes: LIMITS.grepLineBytes,
    filesSearched: counts.filesSearched,
    filesMatched: counts.filesMatched,
    skipped: { binary: counts.binary, tooLarge: counts.tooLarge, special: counts.special, symlinks: counts.symlinks, unreadable: counts.unreadable + unreadableDirectories },
  };
  if (ctx.fence === false) return { ...common, matches };
  // For a model, every line taken from a file goes inside one fence; the structured part keeps only positions.
  const lines: string[] = [];
  for (const m of matches) {
    if (contextLines > 0 && lines.length) lines.push("--");
    (m.before ?? []).forEach((text, i) => lines.push(`${m.path}-${m.line - (m.before!.length - i)}-${text}`));
    lines.push(`${m.path}:${m.line}:${m.text}`);
    (m.after ?? []).forEach((text, i) => lines.push(`${m.path}-${m.line + i + 1}-${text}`));
  }
  return {
    ...common,
    matches: matches.map((m) => ({ path: m.path, line: m.line, column: m.column, ...(m.textTruncated ? { textTruncated: true, omittedBytes: m.omittedBytes } : {}) })),
    content: fenceFor(ctx, lines.join("\n"), "grep results"),
  };
}

