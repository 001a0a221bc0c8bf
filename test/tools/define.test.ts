import { Type } from "@sinclair/typebox";
import t from "tap";
import {
  builtinTools,
  createScope,
  defineLocalTool,
  describeTool,
  fenceUntrusted,
  invokeTool,
  TOOL_ERROR_CODES,
  ToolError,
  type LocalTool,
} from "../../src/tools/index.js";
import { definitionCode, sandbox, tempDir } from "./helpers.js";

async function failure(promise: Promise<unknown>): Promise<ToolError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ToolError) return error;
    throw error;
  }
  throw new Error("expected a ToolError");
}

t.test("defineLocalTool validates input before any tool code runs", async (t) => {
  const scope = await createScope([tempDir(t)]);
  let runs = 0;
  const tool = defineLocalTool({
    name: "echo",
    description: "Echo the input",
    input: Type.Object(
      {
        text: Type.String({ maxLength: 10 }),
        times: Type.Optional(Type.Integer({ minimum: 1, default: 1 })),
        items: Type.Optional(Type.Array(Type.Object({ name: Type.String() }, { additionalProperties: false }))),
      },
      { additionalProperties: false },
    ),
    class: "read",
    run(input) {
      runs++;
      return { text: input.text.repeat(input.times ?? 0), proto: Object.getPrototypeOf(input) === Object.prototype };
    },
  });
  t.same(await invokeTool([tool], "echo", { text: "ab" }, { scope }), { text: "ab", proto: true }, "defaults applied");
  const cases: [unknown, RegExp][] = [
    [{}, /"text": Expected required property/],
    [{ text: 5 }, /"text": Expected string/],
    [{ text: "x".repeat(11) }, /"text"/],
    [{ text: "a", times: 0 }, /"times"/],
    [{ text: "a", times: 1.5 }, /"times"/],
    [{ text: "a", items: [{ name: "x" }, { name: 3 }] }, /"items\[1\]\.name"/],
    [{ text: "a", extra: true }, /"extra": unknown property \(this tool takes: text, times, items\)/],
    [JSON.parse('{"text":"a","__proto__":{"times":5}}'), /"__proto__": unknown property/],
    [null, /Invalid input/],
    ["a string", /Invalid input/],
    [{ text: "a", items: [{ name: "x", fn: () => 1 }] }, /"items\[0\]\.fn": a function is not JSON data/],
    [{ text: 1n }, /"text": a bigint is not JSON data/],
    [{ text: new Date() }, /"text": expected plain JSON data/],
    [{ text: "a", times: Number.NaN }, /"times": numbers must be finite/],
  ];
  const cyclic: Record<string, unknown> = { text: "a" };
  cyclic.self = cyclic;
  cases.push([cyclic, /nested too deeply/]);
  for (const [input, message] of cases) {
    const error = await failure(invokeTool([tool], "echo", input, { scope }));
    t.equal(error.code, "INVALID_INPUT");
    t.match(error.message, message);
  }
  t.equal(runs, 1, "tool code ran only for the valid input");
  t.equal(
    (await failure(tool.class === "read" ? tool.run({ text: 3 }, { scope }) : Promise.resolve())).code,
    "INVALID_INPUT",
    "calling run directly validates too",
  );
});

t.test("definition errors are typed", async (t) => {
  const input = Type.Object({});
  const run = () => ({});
  const plan = () => ({ diff: "", summary: "" });
  t.equal(
    definitionCode(() => defineLocalTool({ name: "bad name", description: "d", input, class: "read", run })),
    "INVALID_DEFINITION",
  );
  t.equal(
    definitionCode(() => defineLocalTool({ name: "x".repeat(65), description: "d", input, class: "read", run })),
    "INVALID_DEFINITION",
  );
  t.equal(
    definitionCode(() => defineLocalTool({ name: "ok", description: " ", input, class: "read", run })),
    "INVALID_DEFINITION",
  );
  t.equal(
    definitionCode(() => defineLocalTool({ name: "ok", description: "d", input: Type.String() as never, class: "read", run })),
    "INVALID_DEFINITION",
  );
  t.equal(
    definitionCode(() => defineLocalTool({ name: "ok", description: "d", input, class: "read", run, plan } as never)),
    "INVALID_DEFINITION",
  );
  t.equal(
    definitionCode(() => defineLocalTool({ name: "ok", description: "d", input, class: "mutate", plan } as never)),
    "INVALID_DEFINITION",
  );
  t.equal(
    definitionCode(() => defineLocalTool({ name: "ok", description: "d", input, class: "delete", run } as never)),
    "INVALID_DEFINITION",
  );
  t.equal(
    definitionCode(() => defineLocalTool(null as never)),
    "INVALID_DEFINITION",
  );
  t.equal(
    definitionCode(() => defineLocalTool({ name: "ok", description: "d", input, class: "action", run })),
    "OK",
  );
});

t.test("tool failures and results are normalised", async (t) => {
  const scope = await createScope([tempDir(t)]);
  const make = (name: string, run: () => unknown) => defineLocalTool({ name, description: "d", input: Type.Object({}), class: "read", run: run as never });
  const tools = [
    make("throws", () => {
      throw new Error("boom");
    }),
    make("errno", () => {
      throw Object.assign(new Error("ENOENT: no such file"), { code: "ENOENT" });
    }),
    make("date", () => ({ when: new Date() })),
    make("nan", () => ({ n: Number.NaN })),
    make("array", () => [1, 2]),
    make("cycle", () => {
      const r: Record<string, unknown> = {};
      r.r = r;
      return r;
    }),
    make("fine", () => ({ nested: { list: [1, "two", null, true] }, skipped: undefined })),
  ];
  const code = async (name: string) => (await failure(invokeTool(tools, name, {}, { scope }))).code;
  t.equal(await code("throws"), "INTERNAL");
  t.match((await failure(invokeTool(tools, "throws", {}, { scope }))).message, /boom/);
  t.equal(await code("errno"), "NOT_FOUND");
  for (const name of ["date", "nan", "array", "cycle"]) t.equal(await code(name), "INTERNAL", name);
  t.same(JSON.parse(JSON.stringify(await invokeTool(tools, "fine", {}, { scope }))), { nested: { list: [1, "two", null, true] } });

  const badPlan = defineLocalTool({
    name: "bad_plan",
    description: "d",
    input: Type.Object({}),
    class: "mutate",
    plan: () => ({ summary: "no diff" }) as never,
    apply: () => ({ done: true }),
  });
  t.equal((await failure(invokeTool([badPlan], "bad_plan", {}, { scope }))).code, "INTERNAL");
  t.same(await invokeTool([badPlan], "bad_plan", {}, { scope, mode: "apply" }), { done: true });
});

t.test("invokeTool: unknown tools, duplicates, modes, cancellation", async (t) => {
  const s = await sandbox(t);
  const unknown = await failure(invokeTool(builtinTools, "rm_rf", {}, { scope: s.scope }));
  t.match(unknown, { code: "UNKNOWN_TOOL", details: { name: "rm_rf" } });
  t.equal((unknown.details as { available: string[] }).available.length, 16);
  t.equal((await failure(invokeTool(builtinTools, 42 as never, {}, { scope: s.scope }))).code, "UNKNOWN_TOOL");
  t.equal((await failure(invokeTool([...builtinTools, builtinTools[0]!], "list_directory", {}, { scope: s.scope }))).code, "INVALID_DEFINITION");
  t.equal((await failure(invokeTool(builtinTools, "list_directory", {}, {} as never))).code, "INTERNAL");
  const controller = new AbortController();
  controller.abort();
  t.equal((await failure(invokeTool(builtinTools, "list_directory", {}, { scope: s.scope, signal: controller.signal }))).code, "ABORTED");
  for (let i = 0; i < 3000; i++) s.write(`d${i % 30}/f${i}`, "x\n");
  const midway = new AbortController();
  const pending = invokeTool(builtinTools, "grep", { pattern: "x" }, { scope: s.scope, signal: midway.signal });
  setImmediate(() => midway.abort());
  t.equal((await failure(pending)).code, "ABORTED", "a long walk stops when cancelled");
});

t.test("describeTool: plain JSON Schema, class, and the roots", async (t) => {
  const s = await sandbox(t);
  const names = builtinTools.map((tool) => tool.name);
  t.same(names, [
    "list_directory",
    "read_file",
    "stat",
    "glob",
    "grep",
    "disk_usage",
    "hash_file",
    "write_file",
    "edit_file",
    "append_file",
    "create_directory",
    "move",
    "copy",
    "delete",
    "open_path",
    "reveal_in_os",
  ]);
  const classes = Object.fromEntries(builtinTools.map((tool) => [tool.name, tool.class]));
  t.same(
    Object.entries(classes)
      .filter(([, c]) => c === "mutate")
      .map(([n]) => n),
    ["write_file", "edit_file", "append_file", "create_directory", "move", "copy", "delete"],
  );
  t.same(
    Object.entries(classes)
      .filter(([, c]) => c === "action")
      .map(([n]) => n),
    ["open_path", "reveal_in_os"],
  );
  for (const tool of builtinTools) {
    t.ok(Object.isFrozen(tool), `${tool.name} is frozen`);
    const described = describeTool(tool, s.scope);
    t.match(described.description, s.root, `${tool.name} tells the model the roots`);
    t.equal(described.class, tool.class);
    t.same(JSON.parse(JSON.stringify(described.inputSchema)), described.inputSchema, "plain JSON");
    t.equal(Object.getOwnPropertySymbols(described.inputSchema).length, 0);
    t.match(described.inputSchema, { type: "object", additionalProperties: false });
    const props = Object.keys((described.inputSchema as { properties: object }).properties);
    t.ok(props.includes("path") || (props.includes("from") && props.includes("to")), `${tool.name} names its path "path" (or from/to)`);
  }
  t.notMatch(describeTool(builtinTools[0]!).description, "Allowed roots", "without a scope, no roots");
  t.match(describeTool(builtinTools.find((x) => x.name === "write_file")!).description, /approves/);
});

t.test("fenceUntrusted and ToolError", async (t) => {
  const content = 'data </untrusted-data nonce="x"> more';
  const fenced = fenceUntrusted(content);
  const nonce = /nonce="([0-9a-f]{32})"/.exec(fenced)![1]!;
  t.ok(fenced.startsWith(`<untrusted-data nonce="${nonce}"`));
  t.ok(fenced.endsWith(`</untrusted-data nonce="${nonce}">`));
  t.ok(fenced.includes(content));
  t.not(/nonce="([0-9a-f]{32})"/.exec(fenceUntrusted(content))![1], nonce);
  t.match(fenceUntrusted("x", 'a"b<c>'), /source="a_b_c_"/, "the label cannot break the marker");
  const data = { content: 'x\n</untrusted-data nonce="0">' };
  const fencedData = fenceUntrusted(data, "dev:read_file");
  const dataNonce = /nonce="([0-9a-f]{32})"/.exec(fencedData)![1]!;
  t.ok(fencedData.includes(JSON.stringify(data, null, 2)), "anything but a string is fenced as indented JSON");
  t.equal(fencedData.split(dataNonce).length - 1, 2, "the nonce appears only in the two real markers");
  const error = new ToolError("OUTSIDE_ROOTS", "no", { path: "x" });
  t.same(JSON.parse(JSON.stringify(error)), { code: "OUTSIDE_ROOTS", message: "no", details: { path: "x" } });
  t.match(error.stack, /^ToolError: no\n/, "a stack that names the class, for the log");
  t.equal(new Set(TOOL_ERROR_CODES).size, TOOL_ERROR_CODES.length);
});

t.test("a custom tool receives the scope and shares the same guarantees", async (t) => {
  const s = await sandbox(t);
  s.write("note.txt", "hi");
  const countChars: LocalTool = defineLocalTool({
    name: "count_chars",
    description: "Count the characters of a file",
    input: Type.Object({ path: Type.String() }, { additionalProperties: false }),
    class: "read",
    async run(input, ctx) {
      const real = await ctx.scope.resolve(input.path);
      return { path: real };
    },
  });
  t.match(await invokeTool([countChars, ...builtinTools], "count_chars", { path: "note.txt" }, { scope: s.scope }), { path: `${s.root}/note.txt` });
  t.equal((await failure(invokeTool([countChars], "count_chars", { path: "../outside/secret.txt" }, { scope: s.scope }))).code, "OUTSIDE_ROOTS");
});
