/**
 * The placement rule (docs/architecture.md, "Layout"): the packaged library (everything an entry of package.json
 * ships: src/plugins, src/web, src/http, src/db, src/tools, src/protocol, src/device, ...) never imports the example
 * app (src/app/ with its routes, src/app.ts and the process around it), and every scope name comes from the session plugin's one
 * table (src/plugins/session/scopes.ts), never a string literal.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";

const ROOT = path.resolve(import.meta.dirname, "../..");
const SRC = path.join(ROOT, "src");

/** The example app and the process around it: what `npm start` runs, and no entry exports. */
const APP = ["src/app/", "src/app.ts", "src/server.ts", "src/runtime.ts", "src/cli/"];
const isApp = (file: string) => APP.some((prefix) => (prefix.endsWith("/") ? file.startsWith(prefix) : file === prefix));

const sources = readdirSync(SRC, { recursive: true, encoding: "utf8" })
  .filter((file) => file.endsWith(".ts"))
  .map((file) => path.posix.join("src", file.split(path.sep).join("/")));

t.test("the library never imports the example app", async (t) => {
  const library = sources.filter((file) => !isApp(file));
  t.ok(library.length > 100, `read the library's files (${library.length})`);
  const offending: string[] = [];
  for (const file of library) {
    const text = readFileSync(path.join(ROOT, file), "utf8");
    for (const match of text.matchAll(/\bfrom\s+"(\.{1,2}\/[^"]+)"|\bimport\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g)) {
      const specifier = match[1] ?? match[2]!;
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier)).replace(/\.js$/, ".ts");
      if (isApp(target)) offending.push(`${file} imports ${target}`);
    }
  }
  t.same(offending, [], "no file of the library imports src/app/, src/app.ts or the process around it");
});

t.test("every scope name comes from the one table", async (t) => {
  const table = "src/plugins/session/scopes.ts";
  const offending: string[] = [];
  for (const file of sources.filter((file) => file !== table)) {
    const text = readFileSync(path.join(ROOT, file), "utf8");
    for (const [index, line] of text.split("\n").entries()) {
      const code = line.replace(/\/\/.*$|^\s*\*.*$/, "");
      if (/requiredScope:\s*["'`]|tokenAllows\([^)]*,\s*["'`]|["'`](host:call|offline_access)["'`]/.test(code))
        offending.push(`${file}:${index + 1}: ${line.trim()}`);
    }
  }
  t.same(offending, [], "no scope is written as a string literal outside src/plugins/session/scopes.ts");
});
