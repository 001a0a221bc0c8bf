/**
 * No function is longer than 100 lines: one that long does more than one thing, and should be split
 * into functions a reader can hold in their head. Every function-like node with a body in src/**\/*.ts
 * counts (declarations, methods, arrows, function expressions), from its first line to its last, as
 * the TypeScript compiler parses it.
 *
 * `STILL_TO_SPLIT` lists the long functions known today (file, function name). They are printed, and
 * the list can only shrink: an entry whose function is gone or short again fails, so remove it.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import ts from "typescript";

const ROOT = path.resolve(import.meta.dirname, "../..");
const MAX_LINES = 100;

/** `file: name`, the name as below (`<anon>` for a function with no name of its own nor of what holds it). */
const STILL_TO_SPLIT = new Set([
  "src/web/routes/devices-dashboard.ts: routes",
  "src/plugins/host/service.ts: createHostService",
  "src/plugins/host/device-routes.ts: deviceRoutes",
  "src/plugins/host/device-routes.ts: <anon>",
  "src/plugins/mcp/mcp-plugin.ts: <anon>",
  "src/plugins/mcp/oauth.ts: mcpOAuthPlugins",
]);

/** A function's own name, else the name of the variable, property or method it is assigned to. */
function nameOf(node: ts.SignatureDeclaration): string {
  if (node.name) return node.name.getText();
  const parent = node.parent as { name?: ts.Node } | undefined;
  return parent?.name ? parent.name.getText() : "<anon>";
}

function longFunctions(file: string): Array<{ key: string; lines: number; line: number }> {
  const source = ts.createSourceFile(file, readFileSync(path.join(ROOT, file), "utf8"), ts.ScriptTarget.Latest, true);
  const found: Array<{ key: string; lines: number; line: number }> = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && (node as { body?: ts.Node }).body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const last = source.getLineAndCharacterOfPosition(node.end).line;
      const lines = last - first + 1;
      if (lines > MAX_LINES) found.push({ key: `${file}: ${nameOf(node)}`, lines, line: first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const files = execFileSync("git", ["ls-files", "src/*.ts"], { cwd: ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
t.ok(files.length > 100, `found the source files (${files.length})`);
const long = files.flatMap(longFunctions);

const known = long.filter(({ key }) => STILL_TO_SPLIT.has(key));
if (known.length > 0) t.comment(`still to split:\n${known.map(({ key, lines, line }) => `  ${key} (line ${line}, ${lines} lines)`).join("\n")}`);

t.same(
  long.filter(({ key }) => !STILL_TO_SPLIT.has(key)).map(({ key, lines, line }) => `${key} (line ${line}): ${lines} lines`),
  [],
  `no function over ${MAX_LINES} lines`,
);
const stillLong = new Set(long.map(({ key }) => key));
t.same(
  [...STILL_TO_SPLIT].filter((key) => !stillLong.has(key)),
  [],
  "every exception is still needed (remove an entry once its function is split)",
);
