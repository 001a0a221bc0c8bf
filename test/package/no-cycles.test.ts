/**
 * No import cycles in src/: a module and what it imports can be read, tested and moved without the other
 * knowing of it. The graph is every relative `import` and `export … from` of every src/**\/*.ts file, as the
 * TypeScript compiler parses it (the compiler the function-length check already uses, rather than madge or dpdm as
 * a new dependency for forty lines of graph walking). `import()` expressions are left out: src/ has none between
 * its own files.
 *
 * Type-only imports count. Node never sees them, so a type-only cycle cannot break start-up; but every cycle
 * issue #25 found was one (a type declared in the file that consumes it, or a cache importing the shape its
 * owner resolves), and such a cycle means neither module can be understood alone. A type lives with what owns
 * it, and a consumer that needs a narrow view of another module declares that view itself. It also keeps an
 * `import type` from becoming a runtime cycle the day someone adds a value to it.
 *
 * A failure prints each cycle as a chain of files, first file repeated at the end.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import ts from "typescript";

const ROOT = path.resolve(import.meta.dirname, "../..");

/** The src/ files a file imports or re-exports from, by relative specifier (`./x.js` is `./x.ts` on disk). */
function importsOf(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(path.join(ROOT, file), "utf8"), ts.ScriptTarget.Latest, false);
  const targets: string[] = [];
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) && !ts.isExportDeclaration(statement)) continue;
    const specifier = statement.moduleSpecifier;
    if (!specifier || !ts.isStringLiteral(specifier) || !specifier.text.startsWith(".")) continue;
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier.text)).replace(/\.js$/, ".ts");
    if (existsSync(path.join(ROOT, target))) targets.push(target);
  }
  return targets;
}

/** One cycle through each strongly connected component of more than one file (Tarjan), or a file importing itself. */
function cycles(graph: Map<string, string[]>): string[][] {
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string) => {
    order.set(file, order.size);
    low.set(file, order.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!order.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, order.get(next)!));
    }
    if (low.get(file) !== order.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || (graph.get(file) ?? []).includes(file)) found.push(chainThrough(graph, new Set(component), file));
  };
  for (const file of graph.keys()) if (!order.has(file)) visit(file);
  return found;
}

/** A path from `start` back to itself inside one component (breadth first, so the shortest), for the message. */
function chainThrough(graph: Map<string, string[]>, component: Set<string>, start: string): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const next of graph.get(file) ?? []) {
      if (!component.has(next)) continue;
      if (next === start) {
        const chain = [start];
        for (let at = file; at !== start; at = cameFrom.get(at)!) chain.splice(1, 0, at);
        return [...chain, start];
      }
      if (!cameFrom.has(next)) {
        cameFrom.set(next, file);
        queue.push(next);
      }
    }
  }
  return [start, start];
}

const files = execFileSync("git", ["ls-files", "src/*.ts"], { cwd: ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
t.ok(files.length > 100, `read the source files (${files.length})`);
const graph = new Map(files.map((file) => [file, importsOf(file)]));
t.ok([...graph.values()].reduce((sum, targets) => sum + targets.length, 0) > 300, "found their relative imports");

t.same(
  cycles(graph).map((chain) => chain.join(" → ")),
  [],
  "no import cycle in src/ (type-only imports included)",
);

t.test("the check finds a cycle when there is one", async (t) => {
  const withCycle = new Map(graph);
  withCycle.set("src/db/schema.ts", [...(graph.get("src/db/schema.ts") ?? []), "src/plugins/host/devices.ts"]);
  const found = cycles(withCycle).map((chain) => chain.join(" → "));
  t.equal(found.length, 1, "one cycle");
  t.match(found[0], /^src\/(db\/schema|plugins\/host\/devices)\.ts → .* → src\/(db\/schema|plugins\/host\/devices)\.ts$/, String(found[0]));
});
