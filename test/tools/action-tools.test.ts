import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { builtinTools, defaultOpener, invokeTool, ToolError, type OpenerCommands } from "../../src/tools/index.js";
import { sandbox, tempDir } from "./helpers.js";

/** A harmless stand-in for xdg-open: records its arguments, one per line. */
function recorder(t: Parameters<typeof tempDir>[0], exitCode = 0) {
  const dir = tempDir(t, "tether-opener-");
  const log = path.join(dir, "argv.log");
  const file = path.join(dir, "opener");
  fs.writeFileSync(file, `#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a" >> "${log}"; done\necho "opener complains" >&2\nexit ${exitCode}\n`);
  fs.chmodSync(file, 0o755);
  return { file, argv: () => (fs.existsSync(log) ? fs.readFileSync(log, "utf8").trimEnd().split("\n") : []) };
}

t.test("open_path and reveal_in_os start the opener with the real path as one argument", async (t) => {
  const s = await sandbox(t);
  const rec = recorder(t);
  const awkward = s.write("-rf x; $(id) 'q'.txt", "hi");
  s.write("sub/file.pdf", "%PDF-");
  const call = (name: string, input: unknown, opener: Partial<OpenerCommands>) =>
    invokeTool(builtinTools, name, input, { scope: s.scope, opener }) as Promise<Record<string, unknown>>;

  const opened = await call("open_path", { path: "-rf x; $(id) 'q'.txt" }, { open: [rec.file] });
  t.match(opened, { path: awkward, opened: true, command: [rec.file, awkward], stillRunning: false });
  t.same(rec.argv(), [awkward]);
  await call("open_path", { path: "sub" }, { open: [rec.file, "--new-window"] });
  t.same(rec.argv().slice(1), ["--new-window", path.join(s.root, "sub")]);
  await call("reveal_in_os", { path: "sub/file.pdf" }, { reveal: [rec.file, "-R"] });
  t.same(rec.argv().slice(3), ["-R", path.join(s.root, "sub/file.pdf")]);
  await call("reveal_in_os", { path: "sub/file.pdf" }, { reveal: [rec.file], revealOpensParent: true });
  t.same(rec.argv().slice(5), [path.join(s.root, "sub")], "Linux-style reveal opens the folder holding the item");
  await call("reveal_in_os", { path: "." }, { reveal: [rec.file], revealOpensParent: true });
  t.same(rec.argv().slice(6), [s.root], "a root is revealed itself, never its parent");
});

t.test("open_path refuses what would run as a program", async (t) => {
  const s = await sandbox(t);
  const rec = recorder(t);
  s.write("run.sh", "echo hi");
  s.write("setup.EXE", "MZ");
  s.write("app.desktop", "[Desktop Entry]");
  s.write("Tool.app/Contents/Info.plist", "<plist/>");
  fs.chmodSync(s.write("no-extension", "#!/bin/sh\n"), 0o755);
  fs.chmodSync(s.write("looks-like.pdf", "#!/bin/sh\n"), 0o755);
  // Windows types that run code, which a deny list had missed: an allow list refuses them unnamed.
  const windows = ["a.jnlp", "b.chm", "c.appref-ms", "d.application", "e.settingcontent-ms", "f.xll", "g.iqy", "h.html", "i.svg", "j.docm", "README"];
  for (const name of windows) s.write(name, "x");
  for (const p of ["run.sh", "setup.EXE", "app.desktop", "Tool.app", "no-extension", "looks-like.pdf", ...windows]) {
    const error = (await invokeTool(builtinTools, "open_path", { path: p }, { scope: s.scope, opener: { open: [rec.file] } }).catch((e) => e)) as ToolError;
    t.equal(error.code, "REFUSED", p);
  }
  t.same(rec.argv(), [], "the opener never ran");
  await invokeTool(builtinTools, "reveal_in_os", { path: "run.sh" }, { scope: s.scope, opener: { reveal: [rec.file] } });
  t.same(rec.argv(), [path.join(s.root, "run.sh")], "revealing it is fine");
});

t.test("open_path opens documents, media and folders", async (t) => {
  const s = await sandbox(t);
  const rec = recorder(t);
  const names = ["report.PDF", "notes.md", "photo.jpeg", "song.mp3", "sheet.xlsx", "folder.v2"];
  for (const name of names.slice(0, -1)) s.write(name, "x");
  fs.mkdirSync(path.join(s.root, "folder.v2"));
  for (const name of names) await invokeTool(builtinTools, "open_path", { path: name }, { scope: s.scope, opener: { open: [rec.file] } });
  t.same(
    rec.argv(),
    names.map((name) => path.join(s.root, name)),
  );
});

t.test("a missing or failing opener is a typed error", async (t) => {
  const s = await sandbox(t);
  s.write("a.txt", "a");
  const code = async (opener: Partial<OpenerCommands>, name = "open_path", input: unknown = { path: "a.txt" }) => {
    try {
      await invokeTool(builtinTools, name, input, { scope: s.scope, opener });
      return "OK";
    } catch (error) {
      return error instanceof ToolError ? `${error.code}: ${error.message}` : `crash: ${String(error)}`;
    }
  };
  t.match(await code({ open: ["/nonexistent/xdg-open"] }), /^OPENER_NOT_FOUND/);
  t.match(await code({ open: ["tether-no-such-opener"] }), /^OPENER_NOT_FOUND/);
  t.match(await code({ open: [] }), /^OPENER_NOT_FOUND/);
  t.match(await code({ reveal: ["tether-no-such-opener"] }, "reveal_in_os"), /^OPENER_NOT_FOUND/);
  t.match(await code({ open: [recorder(t, 4).file] }), /^OPENER_FAILED: .*status 4: opener complains/);
  t.match(await code({ open: [recorder(t).file] }, "open_path", { path: "missing.txt" }), /^NOT_FOUND/);
  t.match(await code({ open: [recorder(t).file] }, "open_path", { path: "../outside/secret.txt" }), /^OUTSIDE_ROOTS/);
});

t.test("default openers per platform", async (t) => {
  t.same(defaultOpener("linux"), { open: ["xdg-open"], reveal: ["xdg-open"], revealOpensParent: true });
  t.same(defaultOpener("darwin"), { open: ["open"], reveal: ["open", "-R"] });
  t.same(defaultOpener("win32"), { open: ["explorer"], reveal: ["explorer", "/select,"] });
});
