/**
 * The identity-checking fallback used where /proc/self/fd is missing (macOS, Windows), forced on here so it is
 * exercised on Linux too. It must give the same results and the same refusals; only its race window differs.
 */
import { applyPatch } from "diff";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { safeFsMode, setSafeFsModeForTesting } from "../../src/tools/fs-safe.js";
import { sandbox, snapshot } from "./helpers.js";

setSafeFsModeForTesting("fallback");
t.teardown(() => setSafeFsModeForTesting(undefined));

t.test("the built-ins work the same through the fallback", async (t) => {
  t.equal(safeFsMode(), "fallback");
  const s = await sandbox(t);
  s.write("a.txt", "alpha\nbeta\n");
  s.write("sub/b.txt", "beta\n");
  s.write("sub/deeper/c.bin", Buffer.from([0, 1, 2]));
  fs.symlinkSync(s.outside, path.join(s.root, "out"));
  fs.symlinkSync(path.join(s.outside, "secret.txt"), path.join(s.root, "secret-link"));
  const before = snapshot(s.outside);

  t.same(
    ((await s.call("list_directory", { recursive: true })).entries as { path: string }[]).map((e) => e.path),
    ["a.txt", "out", "secret-link", "sub", "sub/b.txt", "sub/deeper", "sub/deeper/c.bin"],
  );
  t.match(await s.call("read_file", { path: "a.txt", startLine: 2 }), { content: "beta\n" });
  t.match(await s.call("read_file", { path: "sub/deeper/c.bin" }), { binary: true });
  t.match(await s.call("grep", { pattern: "beta" }), { count: 2, skipped: { binary: 1, symlinks: 2 } });
  t.match(await s.call("glob", { pattern: "**/*.txt" }), { count: 2 });
  t.match(await s.call("disk_usage", {}), { files: 3, symlinks: 2 });
  t.match(await s.call("hash_file", { path: "sub/b.txt" }), { size: 5 });
  t.match(await s.call("stat", { path: "out" }), { type: "symlink", targetOutsideRoots: true });

  const plan = await s.call("edit_file", { path: "a.txt", edits: [{ find: "beta", replace: "gamma" }] });
  t.equal(applyPatch("alpha\nbeta\n", plan.diff as string), "alpha\ngamma\n");
  await s.call("edit_file", { path: "a.txt", edits: [{ find: "beta", replace: "gamma" }] }, "apply");
  await s.call("write_file", { path: "new/dir/w.txt", content: "w\n" }, "apply");
  await s.call("append_file", { path: "new/dir/w.txt", content: "more\n" }, "apply");
  await s.call("create_directory", { path: "made/here" }, "apply");
  await s.call("copy", { from: "sub", to: "sub-copy" }, "apply");
  await s.call("move", { from: "sub-copy", to: "made/moved" }, "apply");
  await s.call("delete", { path: "made", recursive: true }, "apply");
  t.same(snapshot(s.root), {
    "a.txt": "alpha\ngamma\n",
    new: "<dir>",
    "new/dir": "<dir>",
    "new/dir/w.txt": "w\nmore\n",
    out: `-> ${s.outside}`,
    "secret-link": `-> ${path.join(s.outside, "secret.txt")}`,
    sub: "<dir>",
    "sub/b.txt": "beta\n",
    "sub/deeper": "<dir>",
    "sub/deeper/c.bin": "\u0000\u0001\u0002",
  });

  for (const [tool, input] of [
    ["read_file", { path: "secret-link" }],
    ["read_file", { path: "out/secret.txt" }],
    ["list_directory", { path: "out" }],
    ["write_file", { path: "out/x.txt", content: "x" }],
    ["create_directory", { path: "out/x" }],
  ] as const) {
    t.equal(
      (await s.fail(tool, input, tool === "read_file" || tool === "list_directory" ? undefined : "apply")).code,
      "OUTSIDE_ROOTS",
      `${tool} ${JSON.stringify(input)}`,
    );
  }
  t.same(snapshot(s.outside), before);
});
