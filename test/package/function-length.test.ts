/**
 * No function is longer than 100 lines: one that long does more than one thing, and should be split
 * into functions a reader can hold in their head. Every function-like node with a body in src/**\/*.ts
 * counts (declarations, methods, arrows, function expressions), from its first line to its last, as
 * the TypeScript compiler parses it. A failure names the file, the function and its first line.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import ts from "typescript";

const ROOT = path.resolve(import.meta.dirname, "../..");
const MAX_LINES = 100;

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
t.same(
  long.map(({ key, lines, line }) => `${key} (line ${line}): ${lines} lines`),
  [],
  `no function over ${MAX_LINES} lines`,
);
