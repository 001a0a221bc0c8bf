/** Every error code, raised the way callers meet it. The table must cover TOOL_ERROR_CODES exactly. */
import { Type } from "@sinclair/typebox";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import {
  builtinTools,
  createScope,
  defineLocalTool,
  defineShellTool,
  invokeTool,
  TOOL_ERROR_CODES,
  ToolError,
  type ToolErrorCode,
} from "../../src/tools/index.js";
import { fromFsError } from "../../src/tools/errors.js";
import { openFileInScope } from "../../src/tools/safe-read.js";
import { sandbox } from "./helpers.js";

t.test("each error code is raised with a human message", async (t) => {
  const s = await sandbox(t);
  s.write("a.txt", "one two two\n");
  s.write("bin", Buffer.from([0, 1]));
  s.write("dir/x", "x");
  fs.mkdirSync(path.join(s.root, "locked"));
  fs.symlinkSync("loop", path.join(s.root, "loop"));
  execFileSync("mkfifo", [path.join(s.root, "fifo")]);
  const big = path.join(s.root, "big");
  fs.writeFileSync(big, "x");
  fs.truncateSync(big, 11 * 1024 * 1024);

  const locked = path.join(s.root, "locked");
  const root = process.getuid?.() === 0;
  if (root) execFileSync("chattr", ["+i", locked]);
  else fs.chmodSync(locked, 0o500);
  t.teardown(() => (root ? execFileSync("chattr", ["-i", locked]) : fs.chmodSync(locked, 0o700)));

  const swapper = defineLocalTool({
    name: "swapper",
    description: "Resolves, lets the tree change, then opens",
    input: Type.Object({}),
    class: "read",
    async run(_input, ctx) {
      const real = await ctx.scope.resolve("dir/x");
      fs.renameSync(path.join(s.root, "dir"), path.join(s.root, "dir.moved"));
      fs.symlinkSync(s.outside, path.join(s.root, "dir"));
      openFileInScope(ctx.scope, real);
      return {};
    },
  });
  const notJson = defineLocalTool({ name: "not_json", description: "d", input: Type.Object({}), class: "read", run: () => ({ when: new Date() }) });
  // A plan over the protocol's bounds (src/protocol/plan.ts): more entries than a plan may list.
  const sprawling = defineLocalTool({
    name: "sprawling",
    description: "Plans a delete listing too many entries",
    input: Type.Object({}),
    class: "mutate",
    plan: () => ({ diff: "", summary: "Delete everything", removes: Array.from({ length: 1001 }, (_, i) => ({ path: `f${i}`, type: "file" })) }),
    apply: () => ({ applied: true }),
  });
  const call = (name: string, input: unknown, mode?: "plan" | "apply") =>
    invokeTool([...builtinTools, swapper, notJson], name, input, { scope: s.scope, ...(mode ? { mode } : {}) });
  const aborted = new AbortController();
  aborted.abort();

  const triggers: Record<ToolErrorCode, () => unknown> = {
    INVALID_INPUT: () => call("read_file", { path: 1 }),
    INVALID_PATH: () => call("read_file", { path: "\\\\server\\share\\x" }),
    INVALID_MODE: () => call("read_file", { path: "a.txt" }, "apply"),
    INVALID_DEFINITION: () => defineShellTool({ name: "x", description: "d", command: ["tool", "{nope}"] }),
    INVALID_ROOT: () => createScope([path.join(s.root, "no-such-root")]),
    UNKNOWN_TOOL: () => call("format_disk", {}),
    OUTSIDE_ROOTS: () => call("read_file", { path: "../outside/secret.txt" }),
    NOT_FOUND: () => call("read_file", { path: "missing" }),
    ALREADY_EXISTS: () => call("create_directory", { path: "a.txt" }),
    NOT_A_DIRECTORY: () => call("list_directory", { path: "a.txt" }),
    IS_A_DIRECTORY: () => call("read_file", { path: "dir" }),
    SPECIAL_FILE: () => call("read_file", { path: "fifo" }),
    SYMLINK_LOOP: () => call("read_file", { path: "loop" }),
    PATH_CHANGED: () => call("swapper", {}),
    PERMISSION_DENIED: () => call("write_file", { path: "locked/new.txt", content: "x" }, "apply"),
    DIRECTORY_NOT_EMPTY: () => call("delete", { path: "dir.moved" }),
    FILE_TOO_LARGE: () => call("edit_file", { path: "big", edits: [{ find: "x", replace: "y" }] }),
    BINARY_FILE: () => call("edit_file", { path: "bin", edits: [{ find: "x", replace: "y" }] }),
    FIND_NOT_FOUND: () => call("edit_file", { path: "a.txt", edits: [{ find: "three", replace: "3" }] }),
    FIND_AMBIGUOUS: () => call("edit_file", { path: "a.txt", edits: [{ find: "two", replace: "2" }] }),
    EDITS_OVERLAP: () =>
      call("edit_file", {
        path: "a.txt",
        edits: [
          { find: "one two", replace: "x" },
          { find: "e tw", replace: "y" },
        ],
      }),
    FILE_CHANGED: () => call("edit_file", { path: "a.txt", edits: [{ find: "one", replace: "1" }], expectedSha256: "0".repeat(64) }, "apply"),
    REFUSED: () => call("delete", { path: ".", recursive: true }),
    OPENER_NOT_FOUND: () => invokeTool(builtinTools, "open_path", { path: "a.txt" }, { scope: s.scope, opener: { open: ["tether-no-such-opener"] } }),
    OPENER_FAILED: () => invokeTool(builtinTools, "open_path", { path: "a.txt" }, { scope: s.scope, opener: { open: ["false"] } }),
    COMMAND_NOT_FOUND: () =>
      invokeTool([defineShellTool({ name: "ghost", description: "d", command: ["tether-no-such-program"] })], "ghost", {}, { scope: s.scope }),
    TIMEOUT: () => invokeTool([defineShellTool({ name: "slow", description: "d", command: ["sleep", "5"], timeoutMs: 100 })], "slow", {}, { scope: s.scope }),
    ABORTED: () => invokeTool(builtinTools, "read_file", { path: "a.txt" }, { scope: s.scope, signal: aborted.signal }),
    // A real EIO from the kernel: /proc/self/mem read at offset 0, which is never mapped (Linux).
    IO_ERROR: async () => invokeTool(builtinTools, "read_file", { path: "/proc/self/mem" }, { scope: await createScope(["/proc/self"]) }),
    INTERNAL: () => call("not_json", {}),
    PLAN_INVALID: () => invokeTool([sprawling], "sprawling", {}, { scope: s.scope }),
  };
  t.same(Object.keys(triggers).sort(), [...TOOL_ERROR_CODES].sort(), "every code has a trigger");
  for (const [expected, trigger] of Object.entries(triggers)) {
    let error: unknown;
    try {
      await trigger();
    } catch (caught) {
      error = caught;
    }
    t.ok(error instanceof ToolError, `${expected}: a ToolError`);
    t.equal((error as ToolError).code, expected, `${expected}: ${(error as Error).message}`);
    t.ok((error as ToolError).message.length > 10, `${expected} has a message`);
    t.match(JSON.parse(JSON.stringify(error)), { code: expected, message: (error as ToolError).message }, `${expected} reaches the wire as { code, message }`);
  }
  t.equal(fromFsError(Object.assign(new Error("x"), { code: "ENOSPC" }), "f").code, "IO_ERROR");
  t.equal(fromFsError(Object.assign(new Error("x"), { code: "EACCES" }), "f").code, "PERMISSION_DENIED");
});
