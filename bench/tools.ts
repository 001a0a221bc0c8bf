/**
 * Local tools on a 20,000-file tree, each against a system tool run in the same process of this bench on the
 * same (warm) tree: grep vs `grep -rn`, list_directory (recursive) vs `find`, disk_usage vs `du -sb`. Ratios
 * matter, not milliseconds: these machines are noisy. Goal: grep within 3x of `grep -rn`.
 *
 *   node --import tsx bench/tools.ts
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { builtinTools, createScope, invokeTool, type Scope } from "../src/tools/index.js";

const run = promisify(execFile);
const FILES = 20_000;
const DIRS = 200; // 20 top-level folders with 10 sub-folders each
const RUNS = 5;
const NEEDLE = "needle_marker";
/** A regex with a required literal (prefiltered on bytes), and one without (every file decoded and matched). */
const REGEX = "needle_marker = [0-9]+";
const NO_LITERAL = "[nN]e+dle_[a-z]+ = [0-9]+";

function makeTree(root: string): { matchingLines: number; bytes: number } {
  let matchingLines = 0;
  let bytes = 0;
  const filler = ["const value = compute(input, options);", "// a comment about nothing in particular", "export function helper(x) { return x * 2; }", "import { thing } from './thing.js';", ""];
  for (let i = 0; i < FILES; i++) {
    const dir = path.join(root, `pkg${i % 20}`, `mod${Math.floor(i / 20) % 10}`);
    if (i < DIRS) fs.mkdirSync(dir, { recursive: true });
    const lines: string[] = [];
    for (let l = 0; l < 8; l++) lines.push(filler[(i + l) % filler.length]!);
    if (i % 50 === 0) {
      lines.splice(3, 0, `const ${NEEDLE} = ${i};`);
      matchingLines++;
    }
    const text = `${lines.join("\n")}\n`;
    bytes += text.length;
    fs.writeFileSync(path.join(dir, `file${i}.ts`), text);
  }
  return { matchingLines, bytes };
}

async function median(fn: () => Promise<unknown>): Promise<number> {
  await fn(); // warm-up (page cache, JIT)
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await fn();
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

function row(label: string, ours: number, baselineLabel: string, baseline: number, goal?: number): void {
  const ratio = ours / baseline;
  const verdict = goal === undefined ? "" : ratio <= goal ? `  (goal <= ${goal}x: met)` : `  (goal <= ${goal}x: NOT met)`;
  console.log(`${label.padEnd(34)} ${ours.toFixed(1).padStart(8)} ms   ${baselineLabel.padEnd(14)} ${baseline.toFixed(1).padStart(8)} ms   ${ratio.toFixed(2).padStart(5)}x${verdict}`);
}

async function tool(scope: Scope, name: string, input: object): Promise<Record<string, unknown>> {
  return (await invokeTool(builtinTools, name, input, { scope, fence: false })) as Record<string, unknown>;
}

export async function benchTools(): Promise<void> {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "tether-bench-tools-")));
  try {
    console.log(`\n## Local tools on a ${FILES.toLocaleString("en")}-file tree (median of ${RUNS} warm runs, vs a system tool in the same run)\n`);
    const generated = performance.now();
    const { matchingLines, bytes } = makeTree(base);
    console.log(`tree: ${FILES} files in ${DIRS} folders, ${(bytes / 1024 / 1024).toFixed(1)} MB, made in ${((performance.now() - generated) / 1000).toFixed(1)} s\n`);
    const scope = await createScope([base]);

    // Correctness first: the same matches as grep, and all of the tree seen.
    for (const pattern of [NEEDLE, REGEX, NO_LITERAL]) {
      const check = await tool(scope, "grep", { pattern });
      const grepLines = (await run("grep", ["-rnE", pattern, base], { maxBuffer: 64 * 1024 * 1024 })).stdout.trimEnd().split("\n").length;
      const ourTotal = (check.count as number) + (check.omittedMatches as number);
      if (ourTotal !== grepLines || ourTotal !== matchingLines) throw new Error(`grep ${pattern} disagrees: ours ${ourTotal}, grep -rnE ${grepLines}, generated ${matchingLines}`);
    }
    const listed = await tool(scope, "list_directory", { recursive: true });
    if ((listed.count as number) + (listed.omitted as number) !== FILES + DIRS + 20) throw new Error("list_directory missed entries");

    const grep = (...args: string[]) => median(() => run("grep", [...args, base], { maxBuffer: 64 * 1024 * 1024 }));
    row(`grep ${NEEDLE}`, await median(() => tool(scope, "grep", { pattern: NEEDLE })), "grep -rn", await grep("-rn", NEEDLE), 3);
    row(`grep "${REGEX}"`, await median(() => tool(scope, "grep", { pattern: REGEX })), "grep -rnE", await grep("-rnE", REGEX), 3);
    row("grep literal", await median(() => tool(scope, "grep", { pattern: NEEDLE, literal: true })), "grep -rnF", await grep("-rnF", NEEDLE), 3);
    row("grep ignoreCase", await median(() => tool(scope, "grep", { pattern: NEEDLE.toUpperCase(), ignoreCase: true })), "grep -rni", await grep("-rni", NEEDLE.toUpperCase()), 3);
    row(`grep "${NO_LITERAL}" (no literal)`, await median(() => tool(scope, "grep", { pattern: NO_LITERAL })), "grep -rnE", await grep("-rnE", NO_LITERAL), 3);
    row("list_directory (recursive)", await median(() => tool(scope, "list_directory", { recursive: true })), "find", await median(() => run("find", [base], { maxBuffer: 64 * 1024 * 1024 })));
    row("disk_usage", await median(() => tool(scope, "disk_usage", {})), "du -sb", await median(() => run("du", ["-sb", base])));
    row("glob **/*.ts", await median(() => tool(scope, "glob", { pattern: "**/*.ts" })), "find -name", await median(() => run("find", [base, "-name", "*.ts"], { maxBuffer: 64 * 1024 * 1024 })));
    console.log(`\n(grep found ${matchingLines} matching lines, returned 200 and counted the rest; list_directory returns 1000 entries and counts the rest)`);
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) await benchTools();
