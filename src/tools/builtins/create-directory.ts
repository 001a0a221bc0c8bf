import { Type } from "@sinclair/typebox";
import { definePlannedTool, type ToolContext } from "../define.js";
import { ToolError } from "../errors.js";
import { openDirInScope } from "../fs-safe.js";
import { lstatInScope, missingAncestors, pathField, plural } from "./common.js";

async function run(input: { path: string }, ctx: ToolContext, apply: boolean) {
  const real = await ctx.scope.resolve(input.path);
  const existing = lstatInScope(ctx.scope, real);
  if (existing && !existing.isDirectory()) {
    throw new ToolError("ALREADY_EXISTS", `${JSON.stringify(real)} already exists and is not a folder`, { path: real });
  }
  const creates = existing ? [] : [...missingAncestors(ctx.scope, real), real];
  const plan = {
    diff: "",
    summary: creates.length === 0 ? `No change: the folder ${real} already exists` : `Create ${plural(creates.length, "folder")}: ${creates.join(", ")}`,
    path: real,
    unchanged: creates.length === 0,
    createsDirectories: creates,
  };
  if (!apply) return plan;
  const created: string[] = [];
  openDirInScope(ctx.scope, real, { create: true, created }).close();
  return { applied: true, ...plan, createdDirectories: created };
}

export const createDirectory = definePlannedTool({
  name: "create_directory",
  description: "Create a folder, with any missing parent folders (like mkdir -p). An existing folder is not an error.",
  input: Type.Object({ path: pathField("Folder to create") }, { additionalProperties: false }),
  hints: { destructive: false, idempotent: true },
  run,
});
