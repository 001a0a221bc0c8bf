import { Type } from "@sinclair/typebox";
import fs from "node:fs";
import { defineLocalTool } from "../define.js";
import { openFileInScope } from "../safe-read.js";
import { pathField } from "./common.js";
import { hashFd } from "./read-file.js";

export const hashFile = defineLocalTool({
  name: "hash_file",
  description: "sha256 (default) or md5 of a file's bytes, streamed, so any size works.",
  input: Type.Object(
    {
      path: pathField("File to hash"),
      algorithm: Type.Optional(Type.Union([Type.Literal("sha256"), Type.Literal("md5")], { default: "sha256" })),
    },
    { additionalProperties: false },
  ),
  class: "read",
  async run(input, ctx) {
    const real = await ctx.scope.resolve(input.path);
    const algorithm = input.algorithm ?? "sha256";
    const file = openFileInScope(ctx.scope, real);
    try {
      const hash = await hashFd(file.fd, algorithm, ctx.signal);
      return { path: real, algorithm, hash, size: file.stat.size };
    } finally {
      fs.closeSync(file.fd);
    }
  },
});
