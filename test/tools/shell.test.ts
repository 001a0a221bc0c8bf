import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { defineShellTool, invokeTool, ToolError, type LocalTool } from "../../src/tools/index.js";
import { findExecutable } from "../../src/tools/process.js";
import { definitionCode, sandbox, tempDir } from "./helpers.js";

function script(dir: string, name: string, body: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`);
  fs.chmodSync(file, 0o755);
  return file;
}

t.test("a named shell-out runs a fixed program with only the declared arguments", async (t) => {
  const s = await sandbox(t);
  const bin = tempDir(t, "tether-bin-");
  // Prints each argument on its own line, then the working directory.
  const printArgs = script(bin, "ifctool", 'for a in "$@"; do printf "%s\\n" "$a"; done; printf "cwd=%s\\n" "$(pwd)"');
  const convert = defineShellTool({
    name: "convert_ifc",
    description: "Convert a model",
    command: [printArgs, "convert", "{from}", "--to", "{to}", ["--merge", "{folder}"], ["{verbose}"], "--level={level}", ["--note", "{note}"]],
    args: {
      from: { type: "enum", values: ["ifc", "step"] },
      to: { type: "enum", values: ["ifc", "glb"] },
      folder: { type: "path", optional: true, mustExist: true },
      verbose: { type: "boolean", flag: "-v" },
      level: { type: "integer", minimum: 1, maximum: 9 },
      note: { type: "string", optional: true, pattern: "[^\\n]*" },
    },
  });
  t.equal(convert.class, "action");
  s.write("models/a.ifc", "ISO-10303-21;");
  const run = (input: unknown) => invokeTool([convert], "convert_ifc", input, { scope: s.scope }) as Promise<Record<string, unknown>>;
  const lines = (r: Record<string, unknown>) => (r.stdout as string).trimEnd().split("\n");

  const plain = await run({ from: "ifc", to: "glb", level: 3 });
  t.same(lines(plain), ["convert", "ifc", "--to", "glb", "--level=3", `cwd=${s.root}`], "optional groups dropped, cwd is the first root");
  t.match(plain, { exitCode: 0, ok: true, truncated: false, command: [printArgs, "convert", "ifc", "--to", "glb", "--level=3"] });

  const full = await run({ from: "step", to: "ifc", level: 9, folder: "models", verbose: true, note: "a; rm -rf / $(whoami) `id` | x" });
  t.same(
    lines(full),
    ["convert", "step", "--to", "ifc", "--merge", path.join(s.root, "models"), "-v", "--level=9", "--note", "a; rm -rf / $(whoami) `id` | x", `cwd=${s.root}`],
    "values stay single arguments; nothing is interpreted",
  );

  const code = async (input: unknown) => {
    try {
      await run(input);
      return "OK";
    } catch (error) {
      return (error as ToolError).code;
    }
  };
  t.equal(await code({ from: "ifc", to: "glb", level: 3, folder: "../outside" }), "OUTSIDE_ROOTS");
  t.equal(await code({ from: "ifc", to: "glb", level: 3, folder: "missing" }), "NOT_FOUND");
  t.equal(await code({ from: "exe", to: "glb", level: 3 }), "INVALID_INPUT");
  t.equal(await code({ from: "ifc", to: "glb", level: 10 }), "INVALID_INPUT");
  t.equal(await code({ from: "ifc", to: "glb", level: 3, note: "--output=/etc/passwd" }), "INVALID_INPUT", "a leading dash could be an option");
  t.equal(await code({ from: "ifc", to: "glb", level: 3, note: "a\0b" }), "INVALID_INPUT");
  t.equal(await code({ from: "ifc", to: "glb", level: 3, note: "two\nlines" }), "INVALID_INPUT", "the declared pattern is enforced");
  t.equal(await code({ from: "ifc", to: "glb", level: 3, extra: "--evil" }), "INVALID_INPUT", "undeclared arguments are refused");

  const output = (await invokeTool([convert], "convert_ifc", { from: "ifc", to: "glb", level: 1 }, { scope: s.scope })) as { stdout: string };
  t.ok(output.stdout.length > 0, "the command printed something");
  t.notMatch(output.stdout, /untrusted-data/, "output is raw: it is fenced where it meets a model, not here");
});

t.test("exit status, output limits, time-outs, cancellation, missing programs", async (t) => {
  const s = await sandbox(t);
  const bin = tempDir(t, "tether-bin-");
  const tool = (name: string, body: string, extra: object = {}): LocalTool =>
    defineShellTool({ name, description: "d", command: [script(bin, name, body)], ...extra });
  const run = (tl: LocalTool, signal?: AbortSignal) =>
    invokeTool([tl], tl.name, {}, { scope: s.scope, ...(signal ? { signal } : {}) }) as Promise<Record<string, unknown>>;
  const code = async (p: Promise<unknown>) => {
    try {
      await p;
      return "OK";
    } catch (error) {
      return (error as ToolError).code;
    }
  };

  t.match(await run(tool("fails", "echo oops >&2; exit 3")), { exitCode: 3, ok: false, stderr: "oops\n" });
  const loud = await run(tool("loud", "head -c 100000 /dev/zero | tr '\\0' x", { maxOutputBytes: 1000 }));
  t.match(loud, { truncated: true, limitBytes: 1000, omittedStdoutBytes: 99_000 });
  t.equal((loud.stdout as string).length, 1000);
  const started = Date.now();
  t.equal(await code(run(tool("slow", "sleep 5", { timeoutMs: 200 }))), "TIMEOUT");
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 100);
  t.equal(await code(run(tool("slow2", "sleep 5"), controller.signal)), "ABORTED");
  t.ok(Date.now() - started < 3000, "killed promptly");
  t.equal(await code(run(defineShellTool({ name: "ghost", description: "d", command: ["tether-no-such-program"] }))), "COMMAND_NOT_FOUND");
  t.equal(await code(run(defineShellTool({ name: "ghost2", description: "d", command: ["/nonexistent/bin/tool"] }))), "COMMAND_NOT_FOUND");
  t.match(await run(defineShellTool({ name: "echo_hi", description: "d", command: ["echo", "hi"] })), { stdout: "hi\n" }, "a bare name is found on PATH");
});

t.test("PATH lookup never picks a program from a relative PATH entry", async (t) => {
  const dir = tempDir(t);
  script(dir, "planted", "echo planted");
  const cwd = process.cwd();
  process.chdir(dir);
  t.teardown(() => process.chdir(cwd));
  t.equal(findExecutable("planted", { PATH: `.:${path.join(dir, "nope")}:` }), undefined);
  t.equal(findExecutable("planted", { PATH: dir }), path.join(dir, "planted"));
  t.equal(findExecutable("./planted", { PATH: dir }), undefined);
});

t.test("shell tool definitions are checked", async (t) => {
  const base = { name: "x", description: "d" };
  const bad = [
    { command: [] },
    { command: ["./relative/tool"] },
    { command: ["{bin}"], args: { bin: { type: "string" } } },
    { command: ["tool", "{undeclared}"] },
    { command: ["tool"], args: { unused: { type: "string" } } },
    { command: ["tool", "{opt}"], args: { opt: { type: "string", optional: true } } },
    { command: ["tool", ["--x={flag}"]], args: { flag: { type: "boolean", flag: "-f" } } },
    { command: ["tool", "{e}"], args: { e: { type: "enum", values: [] } } },
    { command: ["tool", "{s}"], args: { s: { type: "string", pattern: "(" } } },
    { command: ["tool", []] },
  ];
  for (const def of bad)
    t.equal(
      definitionCode(() => defineShellTool({ ...base, ...def } as never)),
      "INVALID_DEFINITION",
      JSON.stringify(def.command),
    );
  t.equal(
    definitionCode(() => defineShellTool({ ...base, command: ["tool", ["--opt", "{opt}"]], args: { opt: { type: "string", optional: true } } })),
    "OK",
  );
});
