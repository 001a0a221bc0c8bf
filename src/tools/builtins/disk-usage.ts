import { Type } from "@sinclair/typebox";
import fs from "node:fs";
import { defineLocalTool } from "../define.js";
import { openDirInScope } from "../fs-safe.js";
import { walkTree } from "../walk.js";
import { LIMITS, lstatInScope, notFound, optionalPathField } from "./common.js";

export const diskUsage = defineLocalTool({
  name: "disk_usage",
  description:
    "Total size and counts of a folder tree (or one file): bytes (sum of file sizes; a file with several hard links in the tree counts once), allocatedBytes (space on disk, folders included), files, directories, symlinks. Symlinks are counted, never followed. Stops after 1,000,000 entries and reports that.",
  input: Type.Object({ path: optionalPathField("Folder or file to measure (default: the first root)") }, { additionalProperties: false }),
  class: "read",
  async run(input, ctx) {
    const real = await ctx.scope.resolve(input.path ?? ".");
    const top = lstatInScope(ctx.scope, real);
    if (!top) throw notFound(input.path ?? ".");
    const totals = { bytes: 0, allocatedBytes: 0, files: 0, directories: 0, symlinks: 0, other: 0 };
    const allocated = (blocks: number, size: number) => (Number.isFinite(blocks) && blocks >= 0 ? blocks * 512 : size);
    if (!top.isDirectory()) {
      if (top.isFile()) Object.assign(totals, { bytes: top.size, files: 1 });
      else if (top.isSymbolicLink()) totals.symlinks = 1;
      else totals.other = 1;
      totals.allocatedBytes = allocated(top.blocks, top.size);
      return { path: real, ...totals, truncated: false, limit: LIMITS.countEntries, omitted: 0 };
    }
    totals.directories = 1;
    totals.allocatedBytes = allocated(top.blocks, top.size);
    const seen = new Set<string>();
    let visited = 0;
    let truncated = false;
    const dir = openDirInScope(ctx.scope, real);
    try {
      const stats = await walkTree(dir, {
        recursive: true,
        ...(ctx.signal ? { signal: ctx.signal } : {}),
        visit: (entry) => {
          if (++visited > LIMITS.countEntries) {
            truncated = true;
            return false;
          }
          let stat: fs.Stats;
          try {
            stat = fs.lstatSync(entry.dir.at(entry.name));
          } catch {
            return true;
          }
          if (stat.nlink > 1 && !stat.isDirectory()) {
            const key = `${stat.dev}:${stat.ino}`;
            if (seen.has(key)) return true;
            seen.add(key);
          }
          totals.allocatedBytes += allocated(stat.blocks, stat.size);
          if (stat.isFile()) {
            totals.files++;
            totals.bytes += stat.size;
          } else if (stat.isDirectory()) totals.directories++;
          else if (stat.isSymbolicLink()) totals.symlinks++;
          else totals.other++;
          return true;
        },
      });
      return {
        path: real,
        ...totals,
        truncated,
        limit: LIMITS.countEntries,
        // The walk stops at the limit, so how much is left is unknown; the totals are lower bounds.
        ...(truncated ? { omitted: null, totalsAreLowerBounds: true } : { omitted: 0 }),
        ...(stats.unreadable ? { unreadableDirectories: stats.unreadable } : {}),
        ...(stats.depthLimited ? { depthLimitedDirectories: stats.depthLimited } : {}),
      };
    } finally {
      dir.close();
    }
  },
});
