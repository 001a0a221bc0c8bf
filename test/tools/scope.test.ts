import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { execFileSync } from "node:child_process";
import t from "tap";
import { builtinTools, createScope, describeTool, ToolError } from "../../src/tools/index.js";
import { checkPathSyntax, isWithin } from "../../src/tools/paths.js";
import { sandbox, snapshot, tempDir } from "./helpers.js";

async function code(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ToolError) return error.code;
    throw error;
  }
  return "OK";
}

function syntaxCode(input: unknown, flavor: "posix" | "win32"): string {
  try {
    checkPathSyntax(input, flavor);
    return "OK";
  } catch (error) {
    return (error as ToolError).code;
  }
}

t.test("lexical rules: NUL, UNC, extended-length and device prefixes", async (t) => {
  const s = await sandbox(t);
  for (const bad of [
    "a\0b",
    "\0",
    "",
    "//server/share/x",
    "\\\\server\\share\\x",
    "\\\\?\\C:\\x",
    "//?/C:/x",
    "\\\\.\\PhysicalDrive0",
    "//./COM1",
    "\\??\\C:\\x",
    "x".repeat(5000),
  ]) {
    t.equal(await code(s.scope.resolve(bad)), "INVALID_PATH", JSON.stringify(bad.slice(0, 30)));
  }
  // Through a tool the same input is refused before any tool code runs, with the field named.
  const error = await s.fail("read_file", { path: "a\0b" });
  t.equal(error.code, "INVALID_PATH");
  t.equal((await s.fail("read_file", { path: "" })).code, "INVALID_INPUT");
  t.match((await s.fail("read_file", { path: "" })).message, /"path"/);
});

t.test("lexical rules for Windows paths hold on every platform", async (t) => {
  for (const bad of [
    "C:foo",
    "C:",
    "\\foo",
    "/foo",
    "C:\\a\\file.txt:stream",
    "C:\\a\\CON",
    "nul.txt",
    "dir\\COM1.log ",
    "a\\LPT9",
    "CONOUT$",
    "a<b",
    "a|b",
    "\\\\srv\\share",
  ]) {
    t.equal(syntaxCode(bad, "win32"), "INVALID_PATH", bad);
  }
  for (const good of ["C:\\Users\\me\\x.txt", "c:/data/x", "rel\\dir\\file.txt", "console.txt", "com10", "..\\x"]) {
    t.equal(syntaxCode(good, "win32"), "OK", good);
  }
  // On POSIX a backslash is an ordinary character and device names are ordinary names.
  for (const good of ["a\\b", "CON", "nul.txt", "x:y"]) t.equal(syntaxCode(good, "posix"), "OK", good);
  t.equal(syntaxCode(42, "posix"), "INVALID_PATH");
});

t.test("traversal with .. is resolved, then refused outside the roots", async (t) => {
  const s = await sandbox(t);
  s.write("sub/a.txt", "a\n");
  for (const bad of [
    "../outside/secret.txt",
    "sub/../../outside/secret.txt",
    "../../../../../../etc/passwd",
    "/etc/passwd",
    path.join(s.outside, "secret.txt"),
    "..",
    `${s.root}/..`,
  ]) {
    t.equal(await code(s.scope.resolve(bad)), "OUTSIDE_ROOTS", bad);
  }
  t.equal(await s.scope.resolve("sub/.."), s.root);
  t.equal(await s.scope.resolve("./sub/../sub/a.txt"), path.join(s.root, "sub/a.txt"));
  t.equal(await s.scope.resolve("."), s.root);
  const error = await s.fail("read_file", { path: "../outside/secret.txt" });
  t.equal(error.code, "OUTSIDE_ROOTS");
  t.match(error.message, s.root, "the error names the roots");
  t.notMatch(JSON.stringify(error.toJSON()), "TOP SECRET");
});

t.test("a sibling whose name starts with the root's name is outside", async (t) => {
  const base = tempDir(t);
  fs.mkdirSync(path.join(base, "data"));
  fs.mkdirSync(path.join(base, "data-evil"));
  fs.mkdirSync(path.join(base, "database"));
  fs.writeFileSync(path.join(base, "data-evil", "x"), "x");
  const scope = await createScope([path.join(base, "data")]);
  t.equal(await code(scope.resolve(path.join(base, "data-evil", "x"))), "OUTSIDE_ROOTS");
  t.equal(await code(scope.resolve("../data-evil/x")), "OUTSIDE_ROOTS");
  t.equal(await code(scope.resolve(path.join(base, "database"))), "OUTSIDE_ROOTS");
  t.equal(isWithin("/a/data", "/a/data-evil"), false);
  t.equal(isWithin("/a/data", "/a/data/x"), true);
  t.equal(isWithin("/a/data", "/a/data"), true);
  t.equal(isWithin("/", "/anything"), true);
  t.equal(isWithin("C:\\Data", "C:\\Data2\\x", "win32"), false);
  t.equal(isWithin("C:\\Data", "c:\\Data\\x", "win32"), true, "drive letters compare case-insensitively");
});

t.test("symlinks: to a file, to a directory, chained, relative, dangling, in a parent", async (t) => {
  const s = await sandbox(t);
  s.write("sub/inner.txt", "inner\n");
  fs.mkdirSync(path.join(s.outside, "deep", "dir"), { recursive: true });
  fs.writeFileSync(path.join(s.outside, "deep", "secret.txt"), "deep secret\n");
  const link = (target: string, rel: string) => fs.symlinkSync(target, path.join(s.root, rel));
  link(path.join(s.outside, "secret.txt"), "file-out");
  link(path.join(s.root, "sub", "inner.txt"), "file-in");
  link(s.outside, "dir-out");
  link(path.join(s.root, "sub"), "dir-in");
  link("chain2", "chain1");
  link("chain3", "chain2");
  link(path.join(s.outside, "secret.txt"), "chain3");
  link("dir-in/inner.txt", "chain-in");
  link("../outside/secret.txt", "rel-out");
  link("inner.txt", "sub/rel-in");
  link(path.join(s.outside, "missing.txt"), "dangling-out");
  link("sub/will-exist.txt", "dangling-in");
  link(path.join(s.outside, "deep", "dir"), "deep-out");
  link("loop-b", "loop-a");
  link("loop-a", "loop-b");

  const outside = ["file-out", "dir-out", "dir-out/secret.txt", "chain1", "chain2", "rel-out", "dangling-out", "deep-out", "deep-out/../secret.txt"];
  for (const p of outside) t.equal(await code(s.scope.resolve(p)), "OUTSIDE_ROOTS", p);
  t.equal(await s.scope.resolve("file-in"), path.join(s.root, "sub/inner.txt"));
  t.equal(await s.scope.resolve("dir-in/inner.txt"), path.join(s.root, "sub/inner.txt"));
  t.equal(await s.scope.resolve("chain-in"), path.join(s.root, "sub/inner.txt"));
  t.equal(await s.scope.resolve("sub/rel-in"), path.join(s.root, "sub/inner.txt"));
  t.equal(await s.scope.resolve("dangling-in"), path.join(s.root, "sub/will-exist.txt"), "a dangling link inside resolves to its target");
  t.equal(await s.scope.resolve("dir-in/.."), s.root, ".. applies to the real directory");
  t.equal(await code(s.scope.resolve("loop-a")), "SYMLINK_LOOP");
  t.equal(await code(s.scope.resolve("missing/../dir-out/x")), "OUTSIDE_ROOTS", "resolution resumes after a missing component is popped");

  // Link-level resolution names the link itself, which lives inside the root.
  t.equal(await s.scope.resolve("file-out", { followFinal: false }), path.join(s.root, "file-out"));
  t.equal(await code(s.scope.resolve("dir-out/secret.txt", { followFinal: false })), "OUTSIDE_ROOTS", "only the final component is left unfollowed");
  t.equal(await code(s.scope.resolve("dir-out/", { followFinal: false })), "OUTSIDE_ROOTS", "a trailing slash follows");

  const stat = await s.call("stat", { path: "file-out" });
  t.match(stat, { type: "symlink", targetPath: null, targetOutsideRoots: true });
  t.equal(stat.linkTarget, path.join(s.outside, "secret.txt"));
  t.equal((await s.fail("stat", { path: "file-out", followSymlinks: true })).code, "OUTSIDE_ROOTS");

  for (const tool of ["read_file", "hash_file"]) {
    for (const p of ["file-out", "chain1", "rel-out", "dir-out/secret.txt"]) t.equal((await s.fail(tool, { path: p })).code, "OUTSIDE_ROOTS", `${tool} ${p}`);
  }
  t.equal((await s.fail("list_directory", { path: "dir-out" })).code, "OUTSIDE_ROOTS");
  t.equal((await s.fail("grep", { pattern: "secret", path: "dir-out" })).code, "OUTSIDE_ROOTS");
  t.equal((await s.fail("glob", { pattern: "*", path: "dir-out" })).code, "OUTSIDE_ROOTS");
  t.equal((await s.fail("disk_usage", { path: "dir-out" })).code, "OUTSIDE_ROOTS");
  t.match(await s.call("read_file", { path: "chain-in" }), { content: "inner\n" });

  // Walks list links and never enter them.
  const listing = await s.call("list_directory", { recursive: true });
  const paths = (listing.entries as { path: string; type: string }[]).map((e) => `${e.path}:${e.type}`);
  t.ok(paths.includes("dir-out:symlink") && paths.includes("dir-in:symlink"));
  t.notOk(paths.some((p) => p.startsWith("dir-out/") || p.startsWith("dir-in/") || p.startsWith("deep-out/")));
  const grep = await s.call("grep", { pattern: "secret" });
  t.equal(grep.count, 0, "grep does not follow links out");
  const found = await s.call("glob", { pattern: "**/*.txt" });
  t.same(
    (found.matches as { path: string }[]).map((m) => m.path),
    ["sub/inner.txt"],
  );
  const du = await s.call("disk_usage", {});
  t.equal(du.bytes, "inner\n".length, "disk_usage does not count what links point to");
});

t.test("creating under a symlinked directory", async (t) => {
  const s = await sandbox(t);
  fs.mkdirSync(path.join(s.root, "sub"));
  fs.symlinkSync(s.outside, path.join(s.root, "dir-out"));
  fs.symlinkSync(path.join(s.root, "sub"), path.join(s.root, "dir-in"));
  fs.symlinkSync(path.join(s.outside, "made-by-link.txt"), path.join(s.root, "dangling-out"));
  const before = snapshot(s.outside);
  for (const [tool, input] of [
    ["write_file", { path: "dir-out/new.txt", content: "x" }],
    ["write_file", { path: "dir-out/a/b/new.txt", content: "x" }],
    ["write_file", { path: "dangling-out", content: "x" }],
    ["append_file", { path: "dangling-out", content: "x" }],
    ["create_directory", { path: "dir-out/newdir" }],
    ["create_directory", { path: "dir-out/a/b/c" }],
    ["copy", { from: "sub", to: "dir-out/copied" }],
    ["move", { from: "sub", to: "dir-out/moved" }],
  ] as const) {
    for (const mode of ["plan", "apply"] as const) t.equal((await s.fail(tool, input, mode)).code, "OUTSIDE_ROOTS", `${tool} ${mode} ${JSON.stringify(input)}`);
  }
  t.same(snapshot(s.outside), before, "nothing outside changed");
  await s.call("write_file", { path: "dir-in/new.txt", content: "in\n" }, "apply");
  t.equal(fs.readFileSync(path.join(s.root, "sub/new.txt"), "utf8"), "in\n", "a link inside the root is followed to its real directory");
  t.ok(fs.lstatSync(path.join(s.root, "dir-in")).isSymbolicLink(), "the link itself is untouched");
});

t.test("hard links: indistinguishable by path; writes detach instead of writing through", async (t) => {
  const s = await sandbox(t);
  const outsideFile = path.join(s.outside, "shared.txt");
  fs.writeFileSync(outsideFile, "outside content\n");
  const inside = path.join(s.root, "hard.txt");
  fs.linkSync(outsideFile, inside);
  // Documented limitation: a hard link's content is the same inode; reading it reads the outside file's bytes.
  t.match(await s.call("read_file", { path: "hard.txt" }), { content: "outside content\n" });
  t.match(await s.call("stat", { path: "hard.txt" }), { nlink: 2 });
  const plan = await s.call("write_file", { path: "hard.txt", content: "new\n" });
  t.match(plan.summary, /2 hard links/);
  await s.call("write_file", { path: "hard.txt", content: "new\n" }, "apply");
  t.equal(fs.readFileSync(outsideFile, "utf8"), "outside content\n", "the outside name keeps its content");
  t.equal(fs.readFileSync(inside, "utf8"), "new\n");
  t.equal(fs.statSync(outsideFile).nlink, 1, "the link was detached");

  fs.rmSync(inside);
  fs.linkSync(outsideFile, inside);
  await s.call("edit_file", { path: "hard.txt", edits: [{ find: "outside", replace: "edited" }] }, "apply");
  await s.call("append_file", { path: "hard.txt", content: "more\n" }, "apply");
  t.equal(fs.readFileSync(outsideFile, "utf8"), "outside content\n");
  t.equal(fs.readFileSync(inside, "utf8"), "edited content\nmore\n");
  fs.rmSync(inside);
  fs.linkSync(outsideFile, inside);
  await s.call("delete", { path: "hard.txt" }, "apply");
  t.equal(fs.readFileSync(outsideFile, "utf8"), "outside content\n", "delete removes only the name");
});

t.test("special files are refused for reads and never hang", async (t) => {
  const s = await sandbox(t);
  const fifo = path.join(s.root, "pipe");
  execFileSync("mkfifo", [fifo]);
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(path.join(s.root, "sock"), resolve));
  t.teardown(() => server.close());
  const targets = ["pipe", "sock"];
  if (process.getuid?.() === 0) {
    execFileSync("mknod", [path.join(s.root, "zero"), "c", "1", "5"]);
    targets.push("zero");
  }
  fs.symlinkSync("/dev/zero", path.join(s.root, "devlink"));
  const started = Date.now();
  for (const target of targets) {
    for (const tool of ["read_file", "hash_file"]) t.equal((await s.fail(tool, { path: target })).code, "SPECIAL_FILE", `${tool} ${target}`);
    t.equal((await s.fail("edit_file", { path: target, edits: [{ find: "a", replace: "b" }] })).code, "SPECIAL_FILE", `edit_file ${target}`);
    t.equal((await s.fail("copy", { from: target, to: `${target}-copy` })).code, "SPECIAL_FILE", `copy ${target}`);
    t.equal((await s.fail("grep", { pattern: "x", path: target })).code, "SPECIAL_FILE", `grep ${target}`);
  }
  t.equal((await s.fail("read_file", { path: "devlink" })).code, "OUTSIDE_ROOTS");
  const grep = await s.call("grep", { pattern: "x" });
  t.match(grep, { skipped: { special: targets.length } });
  t.match(await s.call("stat", { path: "pipe" }), { type: "fifo" });
  t.ok(Date.now() - started < 5000, "nothing blocked on the FIFO");
});

t.test("createScope: roots are real paths; a missing root is a typed error", async (t) => {
  const base = tempDir(t);
  fs.mkdirSync(path.join(base, "real"));
  fs.symlinkSync(path.join(base, "real"), path.join(base, "alias"));
  fs.writeFileSync(path.join(base, "file"), "x");
  const scope = await createScope([path.join(base, "alias"), path.join(base, "real")]);
  t.same(scope.roots, [path.join(base, "real")], "realpath'd and de-duplicated");
  t.ok(Object.isFrozen(scope.roots));
  for (const bad of [[], [path.join(base, "missing")], [path.join(base, "file")], ["a\0b"], ["//server/share"]]) {
    t.equal(await code(createScope(bad)), "INVALID_ROOT", JSON.stringify(bad));
  }
});

t.test("several roots: relative paths use the first; each root is usable; nothing widens them", async (t) => {
  const base = tempDir(t);
  for (const d of ["one", "two", "three"]) fs.mkdirSync(path.join(base, d));
  fs.writeFileSync(path.join(base, "two", "b.txt"), "b");
  const scope = await createScope([path.join(base, "one"), path.join(base, "two")]);
  t.equal(await scope.resolve("x"), path.join(base, "one", "x"));
  t.equal(await scope.resolve(path.join(base, "two", "b.txt")), path.join(base, "two", "b.txt"));
  t.equal(await code(scope.resolve(path.join(base, "three"))), "OUTSIDE_ROOTS");
  t.equal(await code(scope.resolve("../two/b.txt")), "OK", "a path that lands in another root is inside");
  t.equal(scope.rootOf(path.join(base, "two", "b.txt")), path.join(base, "two"));
  const description = describeTool(builtinTools[0]!, scope).description;
  t.match(description, path.join(base, "one"));
  t.match(description, path.join(base, "two"));
  t.throws(() => (scope.roots as string[]).push("/"), "roots cannot be widened");
});

t.test("an allowed root itself cannot be deleted or moved", async (t) => {
  const base = tempDir(t);
  fs.mkdirSync(path.join(base, "outer", "inner"), { recursive: true });
  const s = await createScope([path.join(base, "outer"), path.join(base, "outer", "inner")]);
  const { invokeTool } = await import("../../src/tools/index.js");
  const run = (name: string, input: unknown) => code(invokeTool(builtinTools, name, input, { scope: s }));
  t.equal(await run("delete", { path: ".", recursive: true }), "REFUSED");
  t.equal(await run("delete", { path: "inner", recursive: true }), "REFUSED");
  t.equal(await run("move", { from: "inner", to: "elsewhere" }), "REFUSED");
  t.equal(await run("move", { from: ".", to: "elsewhere" }), "REFUSED");
});
