/**
 * The README and the guides in docs/ hold what they promise: every relative link reaches a file and, with an
 * anchor, a heading in it; every JSON block parses; every `npm run <script>` they tell a person to type exists;
 * and the configuration reference names exactly the variables the server reads. The embedding example is run
 * as written by exports.test.ts.
 */
import { readFileSync, readdirSync, existsSync } from "node:fs";
import path from "node:path";
import t from "tap";

const ROOT = path.resolve(import.meta.dirname, "../..");
const documents = [
  "README.md",
  "CHANGELOG.md",
  ...readdirSync(path.join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];
const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");

/** Markdown outside fenced code blocks (links and headings in code are not links and headings). */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, "");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, "")
    .replace(/[^\p{L}\p{N}\s-]/gu, "")
    .replace(/\s/g, "-");
}

function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const match of prose(markdown).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(match[1]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

t.test("the README is a front door", async (t) => {
  const lines = read("README.md").split("\n").length;
  t.ok(lines <= 250, `README.md has ${lines} lines (at most 250)`);
  const quickStart = /## Quick start\n([\s\S]*?)\n## /.exec(read("README.md"))?.[1] ?? "";
  const commands = [...quickStart.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!.trim());
  t.same(commands, ["npm install && npm start", "npm test"], "the Quick start is exactly the two commands");
});

t.test("every relative link reaches a file and, with an anchor, a heading in it", async (t) => {
  let checked = 0;
  for (const document of documents) {
    for (const match of prose(read(document)).matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (/^[a-z]+:/i.test(target)) continue; // http(s), mailto: not ours to check offline
      const [file, anchor] = target.split("#") as [string, string | undefined];
      const resolved = file === "" ? document : path.normalize(path.join(path.dirname(document), file));
      checked++;
      if (!existsSync(path.join(ROOT, resolved))) {
        t.fail(`${document}: ${target} does not exist`);
        continue;
      }
      if (anchor !== undefined && resolved.endsWith(".md")) {
        t.ok(anchors(read(resolved)).has(anchor), `${document}: ${target} names a heading of ${resolved}`);
      }
    }
  }
  t.ok(checked > 40, `checked ${checked} links`);
});

t.test("every JSON block parses", async (t) => {
  for (const document of documents) {
    for (const match of read(document).matchAll(/```json\n([\s\S]*?)```/g)) {
      t.doesNotThrow(() => JSON.parse(match[1]!), `${document}: a JSON block parses`);
    }
  }
});

t.test("every `npm run` script the documents name exists", async (t) => {
  const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);
  const named = new Set<string>();
  for (const document of documents) {
    for (const match of read(document).matchAll(/npm run (?:-s )?([a-z][\w:-]*)/g)) named.add(match[1]!);
  }
  t.ok(named.size >= 5, `the documents name ${named.size} scripts`);
  t.same([...named].filter((script) => !scripts.includes(script)).sort(), [], "no document names a missing script");
});

t.test("the configuration reference names exactly the variables the server reads", async (t) => {
  const guide = read("docs/operations.md");
  const reference = guide.slice(guide.indexOf("## Configuration reference"), guide.indexOf("\n## ", guide.indexOf("## Configuration reference") + 5));
  const documented = new Set([...reference.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((match) => match[1]!));
  const source = read("src/config/env.ts");
  const read_ = new Set(
    [...source.matchAll(/env\.([A-Z][A-Z0-9_]+)|env\[["']([A-Z][A-Z0-9_]+)["']\]|["']([A-Z][A-Z0-9_]{2,})["']/g)].map(
      (match) => match[1] ?? match[2] ?? match[3]!,
    ),
  );
  const variables = [...read_].filter((name) => source.includes(`env.${name}`) || source.includes(`"${name}"`));
  t.ok(variables.length >= 20, `src/config/env.ts reads ${variables.length} variables`);
  t.same(variables.filter((name) => !documented.has(name)).sort(), [], "every variable the server reads is documented");
});
