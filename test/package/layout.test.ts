/**
 * The "Layout" section of docs/architecture.md names every directory of the tree, and names none that is gone: a
 * directory added, removed or renamed without that list changing fails here. Directories are those
 * git tracks files in: each top-level one, and every one under src/ (src/views/ is named as a whole;
 * its folders are templates by page area). test/ is named as a whole too.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";

const ROOT = path.resolve(import.meta.dirname, "../..");
const guide = readFileSync(path.join(ROOT, "docs/architecture.md"), "utf8");
const start = guide.indexOf("\n## Layout\n");
t.ok(start >= 0, "docs/architecture.md has a Layout section");
const end = guide.slice(start + 1).search(/\n#{2,3} /);
const section = end < 0 ? guide.slice(start) : guide.slice(start, start + 1 + end);

/** Every `code span` ending in a slash: the directories the section names. */
const named = new Set([...section.matchAll(/`([^`\s]+\/)`/g)].map((match) => match[1]!.replace(/\/$/, "")));

const tracked = execFileSync("git", ["ls-files"], { cwd: ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
const directories = new Set<string>();
for (const file of tracked) {
  const parts = file.split("/").slice(0, -1);
  if (parts.length === 0) continue;
  directories.add(parts[0]!);
  if (parts[0] !== "src") continue;
  for (let depth = 2; depth <= parts.length; depth++) {
    const directory = parts.slice(0, depth).join("/");
    if (directory.startsWith("src/views/")) break;
    directories.add(directory);
  }
}

t.ok(directories.size > 20, `found the tracked directories (${directories.size})`);
t.same([...directories].filter((directory) => !named.has(directory)).sort(), [], "every tracked directory is named in the Layout section");
t.same([...named].filter((directory) => !existsSync(path.join(ROOT, directory))).sort(), [], "every directory the section names exists");
