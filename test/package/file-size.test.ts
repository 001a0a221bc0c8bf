/**
 * No source file grows past 400 lines: a file that long holds more than one responsibility and
 * should be split by them. Every tracked TypeScript, JavaScript, template and stylesheet counts.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";

const ROOT = path.resolve(import.meta.dirname, "../..");
const MAX_LINES = 400;

const files = execFileSync("git", ["ls-files", "*.ts", "*.js", "*.mjs", "*.eta", "*.css"], { cwd: ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
t.ok(files.length > 200, `found the source files (${files.length})`);
const tooLong = files
  .map((file) => ({ file, lines: readFileSync(path.join(ROOT, file), "utf8").split("\n").length - 1 }))
  .filter(({ lines }) => lines > MAX_LINES)
  .map(({ file, lines }) => `${file}: ${lines} lines`);
t.same(tooLong, [], `no file over ${MAX_LINES} lines`);
