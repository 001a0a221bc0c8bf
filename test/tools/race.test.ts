/**
 * Check-then-use: a directory inside the root is swapped for a symlink to the outside while tools run. The
 * swapper is a separate process, so the swaps really interleave with our syscalls.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { ToolError } from "../../src/tools/index.js";
import { openDirInScope, safeFsMode, setSafeFsModeForTesting } from "../../src/tools/fs-safe.js";
import { openFileInScope } from "../../src/tools/safe-read.js";
import { sandbox, snapshot } from "./helpers.js";

const SECRET = "OUTSIDE SECRET\n";
const RACE_MS = 3000;

async function prepare(t: Parameters<typeof sandbox>[0]) {
  const s = await sandbox(t);
  fs.writeFileSync(path.join(s.outside, "f.txt"), SECRET);
  fs.writeFileSync(path.join(s.outside, "outside-only.txt"), SECRET);
  fs.mkdirSync(path.join(s.root, "d"));
  fs.writeFileSync(path.join(s.root, "d", "f.txt"), "inside\n");
  fs.symlinkSync(s.outside, path.join(s.root, "d.link"));
  return s;
}

for (const mode of ["proc", "fallback"] as const) {
  t.test(`a path swapped after it was resolved is refused (${mode})`, async (t) => {
    setSafeFsModeForTesting(mode);
    t.teardown(() => setSafeFsModeForTesting(undefined));
    const s = await prepare(t);
    const file = await s.scope.resolve("d/f.txt");
    const dir = await s.scope.resolve("d");
    fs.renameSync(path.join(s.root, "d"), path.join(s.root, "d.real"));
    fs.renameSync(path.join(s.root, "d.link"), path.join(s.root, "d"));
    const codeOf = (fn: () => unknown) => {
      try {
        fn();
        return "OK";
      } catch (error) {
        return (error as ToolError).code;
      }
    };
    t.equal(
      codeOf(() => openFileInScope(s.scope, file)),
      "PATH_CHANGED",
    );
    t.equal(
      codeOf(() => openDirInScope(s.scope, dir)),
      "PATH_CHANGED",
    );
    t.equal(
      codeOf(() => openDirInScope(s.scope, path.join(dir, "new"), { create: true })),
      "PATH_CHANGED",
    );
    t.notOk(fs.existsSync(path.join(s.outside, "new")));
  });
}

t.test("swapping a directory for a symlink in a loop: zero escapes", { skip: safeFsMode() !== "proc" ? "needs /proc/self/fd (Linux)" : false }, async (t) => {
  const s = await prepare(t);
  const before = snapshot(s.outside);
  const outsideEvents: string[] = [];
  const watcher = fs.watch(s.outside, (event, name) => outsideEvents.push(`${event}:${name}`));
  t.teardown(() => watcher.close());
  const secretHash = createHash("sha256").update(SECRET).digest("hex");

  const swapper = spawn(
    process.execPath,
    [
      "-e",
      // While "d" is missing a tool may legitimately create a fresh "d" (mkdir -p): it is cleared away.
      `const fs = require("fs"); const [root, ms] = process.argv.slice(1);
       const p = (n) => root + "/" + n; const end = Date.now() + Number(ms); let swaps = 0;
       const mv = (a, b) => {
         for (let i = 0; ; i++) {
           try { return fs.renameSync(p(a), p(b)); } catch (e) { if (i > 1000) throw e; }
           try { fs.rmSync(p(b), { recursive: true, force: true }); } catch {}
         }
       };
       while (Date.now() < end) { mv("d", "d.real"); mv("d.link", "d"); mv("d", "d.link"); mv("d.real", "d"); swaps++; }
       process.stdout.write(String(swaps));`,
      s.root,
      String(RACE_MS),
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let swaps = "";
  swapper.stdout.on("data", (chunk) => (swaps += chunk));
  const exited = new Promise<number | null>((resolve) => swapper.on("exit", resolve));
  t.teardown(() => {
    if (swapper.exitCode === null) swapper.kill("SIGKILL");
  });

  const escapes: string[] = [];
  const ok: Record<string, number> = {};
  const refused: Record<string, number> = {};
  const allowed = new Set([
    "NOT_FOUND",
    "PATH_CHANGED",
    "OUTSIDE_ROOTS",
    "NOT_A_DIRECTORY",
    "ALREADY_EXISTS",
    "FILE_CHANGED",
    "DIRECTORY_NOT_EMPTY",
    "IS_A_DIRECTORY",
  ]);
  const attempt = async (label: string, fn: () => Promise<Record<string, unknown>>, check: (r: Record<string, unknown>) => void) => {
    try {
      const result = await fn();
      ok[label] = (ok[label] ?? 0) + 1;
      check(result);
    } catch (error) {
      if (!(error instanceof ToolError) || !allowed.has(error.code)) escapes.push(`${label} threw ${(error as Error).message}`);
      refused[label] = (refused[label] ?? 0) + 1;
    }
  };
  const deadline = Date.now() + RACE_MS - 200;
  let i = 0;
  while (Date.now() < deadline) {
    i++;
    await Promise.all([
      attempt(
        "read_file",
        () => s.call("read_file", { path: "d/f.txt" }),
        (r) => {
          if (r.content !== "inside\n") escapes.push(`read_file returned ${JSON.stringify(r.content)}`);
        },
      ),
      attempt(
        "hash_file",
        () => s.call("hash_file", { path: "d/f.txt" }),
        (r) => {
          if (r.hash === secretHash) escapes.push("hash_file hashed the outside file");
        },
      ),
      attempt(
        "grep",
        () => s.call("grep", { pattern: "SECRET", literal: true, path: "d" }),
        (r) => {
          if (r.count !== 0) escapes.push("grep matched outside content");
        },
      ),
      attempt(
        "list_directory",
        () => s.call("list_directory", { path: "d" }),
        (r) => {
          if ((r.entries as { name: string }[]).some((e) => e.name === "outside-only.txt")) escapes.push("list_directory listed the outside");
        },
      ),
      attempt(
        "write_file",
        () => s.call("write_file", { path: `d/w-${i}.txt`, content: "written\n" }, "apply"),
        () => {},
      ),
      attempt(
        "append_file",
        () => s.call("append_file", { path: "d/log.txt", content: `${i}\n` }, "apply"),
        () => {},
      ),
      attempt(
        "edit_file",
        () => s.call("edit_file", { path: "d/f.txt", edits: [{ find: "inside", replace: "inside" }] }, "apply"),
        () => {},
      ),
      attempt(
        "create_directory",
        () => s.call("create_directory", { path: `d/sub-${i}/x` }, "apply"),
        () => {},
      ),
      attempt(
        "copy",
        () => s.call("copy", { from: "d/f.txt", to: `d/copy-${i}.txt` }, "apply"),
        () => {},
      ),
      attempt(
        "delete",
        () => s.call("delete", { path: `d/w-${i - 1}.txt` }, "apply"),
        () => {},
      ),
    ]);
  }
  await exited;
  t.same(escapes, [], "no read saw outside content and nothing failed unexpectedly");
  t.same(snapshot(s.outside), before, "the outside tree is unchanged");
  t.same(outsideEvents, [], "nothing was even briefly created, changed or removed outside");
  t.ok(Number(swaps) > 100, `the swapper really swapped (${swaps} times)`);
  t.ok((ok.read_file ?? 0) > 0 && (ok.write_file ?? 0) > 0 && (ok.create_directory ?? 0) > 0, `operations succeeded between swaps: ${JSON.stringify(ok)}`);
  t.ok(Object.values(refused).reduce((a, b) => a + b, 0) > 0, `and were refused during them: ${JSON.stringify(refused)}`);
});
