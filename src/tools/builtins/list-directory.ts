import { Type } from "@sinclair/typebox";
import fs from "node:fs";
import { defineLocalTool } from "../define.js";
import { openDirInScope, entryTypeOf } from "../fs-safe.js";
import { walkTree, type WalkEntry } from "../walk.js";
import { DEFAULT_SKIPPED_DIRS, LIMITS, isoTime, optionalPathField, flagField } from "./common.js";

type ListedEntry = { name: string; path: string; type: string; size?: number; modified?: string; linkTarget?: string };

function describe(entry: WalkEntry): ListedEntry {
  const out: ListedEntry = { name: entry.name, path: entry.rel, type: entry.type };
  try {
    const p = entry.dir.at(entry.name);
    const stat = fs.lstatSync(p);
    out.type = entryTypeOf(stat);
    if (stat.isFile()) out.size = stat.size;
    out.modified = isoTime(stat.mtimeMs);
    // The link's own text lives inside the root; where it points is not followed.
    if (stat.isSymbolicLink()) out.linkTarget = fs.readlinkSync(p);
  } catch {
    /* vanished since the directory was read: keep what readdir said */
  }
  return out;
}

export const listDirectory = defineLocalTool({
  name: "list_directory",
  description:
    "List a folder's entries (name, relative path, type, size, modification time), optionally recursive. Returns at most 1000 entries and reports how many were left out. Symlinks are listed, never entered. A recursive listing does not enter .git or node_modules unless includeIgnored is true.",
  input: Type.Object(
    {
      path: optionalPathField("Folder to list (default: the first root)"),
      recursive: flagField(false, "Also list sub-folders, depth first"),
      includeIgnored: flagField(false, "Enter .git and node_modules when recursive"),
      limit: Type.Optional(
        Type.Integer({ minimum: 1, maximum: LIMITS.listEntries, default: LIMITS.listEntries, description: "Entries to return (at most 1000)" }),
      ),
    },
    { additionalProperties: false },
  ),
  class: "read",
  async run(input, ctx) {
    const real = await ctx.scope.resolve(input.path ?? ".");
    const recursive = input.recursive ?? false;
    const limit = input.limit ?? LIMITS.listEntries;
    const dir = openDirInScope(ctx.scope, real);
    try {
      const entries: ListedEntry[] = [];
      const ignored: string[] = [];
      let omitted = 0;
      let lowerBound = false;
      const stats = await walkTree(dir, {
        recursive,
        ...(ctx.signal ? { signal: ctx.signal } : {}),
        descend: (entry) => {
          if (input.includeIgnored || !DEFAULT_SKIPPED_DIRS.has(entry.name)) return true;
          ignored.push(entry.rel);
          return false;
        },
        visit: (entry) => {
          if (entries.length < limit) {
            entries.push(describe(entry));
            return true;
          }
          omitted++;
          if (entries.length + omitted >= LIMITS.countEntries) {
            lowerBound = true;
            return false;
          }
          return true;
        },
      });
      return {
        path: real,
        recursive,
        entries,
        count: entries.length,
        truncated: omitted > 0,
        limit,
        omitted,
        ...(lowerBound ? { omittedIsLowerBound: true } : {}),
        ...(ignored.length ? { notEntered: ignored.slice(0, 50), notEnteredCount: ignored.length } : {}),
        ...(stats.unreadable ? { unreadableDirectories: stats.unreadable } : {}),
        ...(stats.depthLimited ? { depthLimitedDirectories: stats.depthLimited } : {}),
      };
    } finally {
      dir.close();
    }
  },
});
