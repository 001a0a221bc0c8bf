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
const RUNS = 7;
const NEEDLE = "needle_marker";
/** A regex with a required literal (prefiltered on bytes), and one without (every file decoded and matched). */
const REGEX = "needle_marker = [0-9]+";
const NO_LITERAL = "[nN]e+dle_[a-z]+ = [0-9]+";

function makeTree(root: string): { matchingLines: number; bytes: number } {
  let matchingLines = 0;
  let bytes = 0;
  const filler = [
    "const value = compute(input, options);",
    "// a comment about nothing in particular",
    "export function helper(x) { return x * 2; }",
    "import { thing } from './thing.js';",
    "",
  ];
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

/**
 * Runs ours and the baseline alternately (after a warm-up of each), so load that comes and goes on a shared
 * machine hits both alike; reports the median time of each and the median of the per-pair ratios.
 */
async function compare(label: string, ours: () => Promise<unknown>, baselineLabel: string, baseline: () => Promise<unknown>, goal?: number): Promise<number> {
  const time = async (fn: () => Promise<unknown>) => {
    const started = performance.now();
    await fn();
    return performance.now() - started;
  };
  await ours();
  await baseline();
  const oursMs: number[] = [];
  const baseMs: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const b = await time(baseline);
    const o = await time(ours);
    baseMs.push(b);
    oursMs.push(o);
    ratios.push(o / b);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const ratio = median(ratios);
  const verdict = goal === undefined ? "" : ratio <= goal ? `  (goal <= ${goal}x: met)` : `  (goal <= ${goal}x: NOT met)`;
  console.log(
    `${label.padEnd(38)} ${median(oursMs).toFixed(1).padStart(8)} ms   ${baselineLabel.padEnd(10)} ${median(baseMs).toFixed(1).padStart(8)} ms   ${ratio.toFixed(2).padStart(5)}x${verdict}`,
  );
  return ratio;
}

async function tool(scope: Scope, name: string, input: object): Promise<Record<string, unknown>> {
  return await invokeTool(builtinTools, name, input, { scope });
}

export async function benchTools(): Promise<void> {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "tether-bench-tools-")));
  try {
    console.log(`\n## Local tools on a ${FILES.toLocaleString("en")}-file tree (${RUNS} warm runs, alternating with a system tool; medians)\n`);
    const generated = performance.now();
    const { matchingLines, bytes } = makeTree(base);
    console.log(
      `tree: ${FILES} files in ${DIRS} folders, ${(bytes / 1024 / 1024).toFixed(1)} MB, made in ${((performance.now() - generated) / 1000).toFixed(1)} s\n`,
    );
    const scope = await createScope([base]);

    // Correctness first: the same matches as grep, and all of the tree seen.
    for (const pattern of [NEEDLE, REGEX, NO_LITERAL]) {
      const check = await tool(scope, "grep", { pattern });
      const grepLines = (await run("grep", ["-rnE", pattern, base], { maxBuffer: 64 * 1024 * 1024 })).stdout.trimEnd().split("\n").length;
      const ourTotal = (check.count as number) + (check.omittedMatches as number);
      if (ourTotal !== grepLines || ourTotal !== matchingLines)
        throw new Error(`grep ${pattern} disagrees: ours ${ourTotal}, grep -rnE ${grepLines}, generated ${matchingLines}`);
    }
    const listed = await tool(scope, "list_directory", { recursive: true });
    if ((listed.count as number) + (listed.omitted as number) !== FILES + DIRS + 20) throw new Error("list_directory missed entries");

    const sys =
      (cmd: string, ...args: string[]) =>
      () =>
        run(cmd, [...args], { maxBuffer: 64 * 1024 * 1024 });
    const ours = (name: string, input: object) => () => tool(scope, name, input);
    await compare(`grep ${NEEDLE}`, ours("grep", { pattern: NEEDLE }), "grep -rn", sys("grep", "-rn", NEEDLE, base), 3);
    await compare(`grep "${REGEX}"`, ours("grep", { pattern: REGEX }), "grep -rnE", sys("grep", "-rnE", REGEX, base), 3);
    await compare(`grep "${NO_LITERAL}"`, ours("grep", { pattern: NO_LITERAL }), "grep -rnE", sys("grep", "-rnE", NO_LITERAL, base), 3);
    await compare("grep literal", ours("grep", { pattern: NEEDLE, literal: true }), "grep -rnF", sys("grep", "-rnF", NEEDLE, base), 3);
    await compare(
      "grep ignoreCase",
      ours("grep", { pattern: NEEDLE.toUpperCase(), ignoreCase: true }),
      "grep -rni",
      sys("grep", "-rni", NEEDLE.toUpperCase(), base),
      3,
    );
    await compare("list_directory (recursive)", ours("list_directory", { recursive: true }), "find", sys("find", base));
    await compare("disk_usage", ours("disk_usage", {}), "du -sb", sys("du", "-sb", base));
    await compare("glob **/*.ts", ours("glob", { pattern: "**/*.ts" }), "find -name", sys("find", base, "-name", "*.ts"));
    console.log(`\n(grep found ${matchingLines} matching lines, returned 200 and counted the rest; list_directory returns 1000 entries and counts the rest)`);
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) await benchTools();
