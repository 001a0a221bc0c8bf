import { Type } from "@sinclair/typebox";
import { defineLocalTool } from "../define.js";
import { ToolError } from "../errors.js";
import { openDirInScope } from "../fs-safe.js";
import { walkTree } from "../walk.js";
import { DEFAULT_SKIPPED_DIRS, LIMITS, compileGlob, optionalPathField, flagField, patternField } from "./common.js";

/**
 * Glob over our own walker rather than a glob library's traversal: the walker is the one that never enters
 * symlinked directories and pins every directory it reads. Matching is `glob-match.ts` (no backtracking).
 */
export const globTool = defineLocalTool({
  name: "glob",
  description:
    "Find files and folders whose path (relative to `path`) matches a glob pattern such as `**/*.ts` or `src/*.{js,json}`. `*` and `?` stay within one folder, `**` crosses folders. Hidden entries match only with dot: true; .git and node_modules are not entered unless the pattern names them or includeIgnored is true. Returns at most 1000 matches and reports how many were left out.",
  input: Type.Object(
    {
      pattern: patternField("Glob pattern, relative to path"),
      path: optionalPathField("Folder to search from (default: the first root)"),
      dot: flagField(false, "Let wildcards match names starting with a dot"),
      includeIgnored: flagField(false, "Also enter .git and node_modules"),
      type: Type.Optional(
        Type.Union([Type.Literal("any"), Type.Literal("file"), Type.Literal("directory")], { default: "any", description: "Only files or only folders" }),
      ),
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.globMatches, default: LIMITS.globMatches })),
    },
    { additionalProperties: false },
  ),
  class: "read",
  async run(input, ctx) {
    const pattern = input.pattern.replace(/^(\.\/)+/, "");
    if (/^[\\/]/.test(pattern) || /^[a-zA-Z]:/.test(pattern)) {
      throw new ToolError("INVALID_INPUT", `Invalid "pattern": it must be relative to path, not absolute`, { field: "pattern" });
    }
    const segments = pattern.split("/");
    if (segments.includes("..")) throw new ToolError("INVALID_INPUT", `Invalid "pattern": ".." is not allowed; set path instead`, { field: "pattern" });
    const dot = input.dot ?? false;
    const limit = input.limit ?? LIMITS.globMatches;
    const wanted = input.type ?? "any";
    const matches = compileGlob(pattern, "pattern", { dot });

    const base = await ctx.scope.resolve(input.path ?? ".");
    const dir = openDirInScope(ctx.scope, base);
    try {
      const found: { path: string; type: string }[] = [];
      let omitted = 0;
      let lowerBound = false;
      const stats = await walkTree(dir, {
        recursive: true,
        ...(ctx.signal ? { signal: ctx.signal } : {}),
        descend: (entry) => {
          // .git and node_modules only when asked for, by option or by naming them in the pattern.
          if (!input.includeIgnored && DEFAULT_SKIPPED_DIRS.has(entry.name) && !matches.literalNames.has(entry.name)) return false;
          return matches.couldMatchBelow(entry.rel);
        },
        visit: (entry) => {
          if (wanted === "file" && entry.type !== "file") return true;
          if (wanted === "directory" && entry.type !== "directory") return true;
          if (!matches(entry.rel)) return true;
          if (found.length < limit) found.push({ path: entry.rel, type: entry.type });
          else if (++omitted + found.length >= LIMITS.countEntries) {
            lowerBound = true;
            return false;
          }
          return true;
        },
      });
      return {
        path: base,
        pattern,
        matches: found,
        count: found.length,
        truncated: omitted > 0,
        limit,
        omitted,
        ...(lowerBound ? { omittedIsLowerBound: true } : {}),
        ...(stats.unreadable ? { unreadableDirectories: stats.unreadable } : {}),
        ...(stats.depthLimited ? { depthLimitedDirectories: stats.depthLimited } : {}),
      };
    } finally {
      dir.close();
    }
  },
});
