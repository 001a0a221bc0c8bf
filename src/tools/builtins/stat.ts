import { Type } from "@sinclair/typebox";
import fs from "node:fs";
import path from "node:path";
import { defineLocalTool } from "../define.js";
import { ToolError } from "../errors.js";
import { openDirInScope, entryTypeOf } from "../fs-safe.js";
import { isoTime, lstatInScope, modeString, notFound, pathField, flagField } from "./common.js";

export const statTool = defineLocalTool({
  name: "stat",
  description:
    "Size, type, permissions, link count and timestamps of a file, folder or symlink. A symlink is described itself (with its target text and, when the target is inside the roots, the target's real path) unless followSymlinks is true.",
  input: Type.Object(
    {
      path: pathField("Path to describe"),
      followSymlinks: flagField(false, "Describe what a final symlink points to instead of the link"),
    },
    { additionalProperties: false },
  ),
  class: "read",
  async run(input, ctx) {
    const real = await ctx.scope.resolve(input.path, { followFinal: input.followSymlinks ?? false });
    const stat = lstatInScope(ctx.scope, real);
    if (!stat) throw notFound(input.path);
    const type = entryTypeOf(stat);
    const result: Record<string, unknown> = {
      path: real,
      type,
      size: stat.size,
      mode: modeString(stat.mode),
      nlink: stat.nlink,
      uid: stat.uid,
      gid: stat.gid,
      modified: isoTime(stat.mtimeMs),
      accessed: isoTime(stat.atimeMs),
      changed: isoTime(stat.ctimeMs),
      created: isoTime(stat.birthtimeMs),
    };
    if (type === "symlink") {
      const dir = openDirInScope(ctx.scope, path.dirname(real));
      try {
        result.linkTarget = fs.readlinkSync(dir.at(path.basename(real)));
      } finally {
        dir.close();
      }
      try {
        result.targetPath = await ctx.scope.resolve(real, { followFinal: true });
        result.targetExists = lstatInScope(ctx.scope, result.targetPath as string) !== undefined;
      } catch (error) {
        if (!(error instanceof ToolError)) throw error;
        // Nothing about the far side of a link that leaves the roots is disclosed.
        result.targetPath = null;
        result.targetOutsideRoots = error.code === "OUTSIDE_ROOTS";
      }
    }
    return result;
  },
});
