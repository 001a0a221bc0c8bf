import { Type } from "@sinclair/typebox";
import fs from "node:fs";
import { definePlannedTool, type ToolContext } from "../define.js";
import { ToolError, fromFsError } from "../errors.js";
import { lstatIn, openChildDir, openDirInScope, parentAndName, entryTypeOf } from "../fs-safe.js";
import { isWithin } from "../paths.js";
import type { Scope } from "../scope.js";
import { readSortedEntries } from "../walk.js";
import { notFound, pathField, plural, flagField } from "./common.js";
import { byteCount } from "./write-helpers.js";
import { removeEntry, summarizeTree, type RemoveCounts } from "./tree-ops.js";

export function refuseRootsInside(scope: Scope, real: string, verb: string): void {
  const root = scope.roots.find((r) => r !== real && isWithin(real, r));
  if (root) throw new ToolError("REFUSED", `Will not ${verb} ${JSON.stringify(real)}: it contains the allowed root ${root}`, { path: real, root });
}

async function run(input: { path: string; recursive?: boolean }, ctx: ToolContext, apply: boolean) {
  // The link itself is deleted, never what it points to.
  const real = await ctx.scope.resolve(input.path, { followFinal: false });
  const { parent, name } = parentAndName(ctx.scope, real);
  refuseRootsInside(ctx.scope, real, "delete");
  const dir = openDirInScope(ctx.scope, parent);
  try {
    const stat = lstatIn(dir, name);
    if (!stat) throw notFound(input.path);
    const type = entryTypeOf(stat);
    let plan: Record<string, unknown> & { diff: string; summary: string };
    if (type !== "directory") {
      const what =
        type === "symlink" ? `the symlink ${real} (only the link; its target is not touched)` : `${type === "file" ? "the file" : `the ${type}`} ${real}`;
      plan = {
        diff: "",
        summary: `Delete ${what}${type === "file" ? ` (${byteCount(stat.size)})` : ""}`,
        path: real,
        type,
        removes: [{ path: name, type, ...(type === "file" ? { size: stat.size } : {}) }],
      };
    } else {
      const child = openChildDir(dir, name);
      try {
        if (!input.recursive) {
          const count = readSortedEntries(child).length;
          if (count > 0) {
            throw new ToolError(
              "DIRECTORY_NOT_EMPTY",
              `${JSON.stringify(real)} is a folder with ${plural(count, "entry")}; set recursive to delete it and everything in it`,
              {
                path: real,
                entries: count,
              },
            );
          }
          plan = { diff: "", summary: `Delete the empty folder ${real}`, path: real, type, removes: [{ path: name, type }] };
        } else {
          const tree = await summarizeTree(child, ctx.signal);
          plan = {
            diff: "",
            summary: `Delete the folder ${real} and everything in it: ${plural(tree.files, "file")} (${byteCount(tree.bytes)}), ${plural(tree.directories, "folder")}, ${plural(tree.symlinks, "symlink")}${tree.other ? `, ${tree.other} other` : ""}`,
            path: real,
            type,
            totals: { files: tree.files, directories: tree.directories + 1, symlinks: tree.symlinks, other: tree.other, bytes: tree.bytes },
            removes: tree.entries,
            truncated: tree.truncated,
            limit: tree.limit,
            omitted: tree.omitted,
          };
        }
      } finally {
        child.close();
      }
    }
    if (!apply) return plan;
    const removed: RemoveCounts = { files: 0, directories: 0, symlinks: 0, other: 0 };
    try {
      if (type === "directory" && !input.recursive) {
        fs.rmdirSync(dir.at(name));
        removed.directories++;
      } else {
        await removeEntry(dir, name, removed, ctx.signal);
      }
    } catch (error) {
      throw fromFsError(error, real, "delete");
    }
    return { applied: true, ...plan, removed };
  } finally {
    dir.close();
  }
}

export const deleteTool = definePlannedTool({
  name: "delete",
  description:
    "Delete a file, a symlink (the link only) or an empty folder; with recursive: true, a folder and everything in it (symlinks inside are removed, never followed). The plan lists what will be removed. An allowed root itself cannot be deleted.",
  input: Type.Object(
    {
      path: pathField("What to delete"),
      recursive: flagField(false, "Delete a non-empty folder and its contents"),
    },
    { additionalProperties: false },
  ),
  run,
});
