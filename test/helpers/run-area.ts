import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { closeIdleDatabases } from "./pglite-pool.js";

let inArea = false;
/** True in a process that `runArea` runs: helpers leave what outlives one file to it (see pglite-pool.ts). */
export function runsInArea(): boolean {
  return inArea;
}

/**
 * Runs every `*.test.ts` file of the given folders (relative to `test/`) in this one process, one file after
 * another, as `npm test` does with each area (`test/<area>.test.ts`).
 *
 * Why: on Node 20 a test process pays 5–10 CPU seconds before its first assertion (the app's ~1,300 modules
 * through tap's and tsx's loader hooks, which Node 20 cannot cache); one process per file made that most of
 * the suite's time (docs/development.md, "What a test file costs"). Each file still runs alone as it always
 * did (`npx tap test/auth/edge-sso.test.ts`): this only changes how many files share a process.
 *
 * How: a file's `import t from "tap"` is this process's root test, so its top-level subtests queue on the root
 * in order. Each file is imported inside a subtest named after it (so the root stays busy while the file sets
 * up, and an import that throws fails there), and a closing subtest runs the teardowns the file registered on
 * the root, in reverse order, before the next file starts: servers and databases are closed per file, not at
 * the end of the process. Registering them here also keeps tap from ending the root early: the root's own
 * `teardown` marks it to end at its first idle moment, which between two files would end the run.
 */
export async function runArea(...folders: string[]): Promise<void> {
  const testRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
  const files = folders.flatMap((folder) =>
    readdirSync(path.join(testRoot, folder))
      .filter((name) => name.endsWith(".test.ts"))
      .sort()
      .map((name) => path.join(testRoot, folder, name)),
  );
  inArea = true;
  let teardowns: Array<() => unknown> = [];
  (t as unknown as { teardown: (fn: () => unknown) => void }).teardown = (fn) => void teardowns.push(fn);

  for (const file of files) {
    const name = path.relative(path.dirname(testRoot), file);
    const started = { wall: performance.now(), cpu: process.cpuUsage() };
    await t.test(name, async (loading) => {
      await loading.resolves(import(file), "its module loads");
    });
    await t.test(`${name}: teardown`, async (closing) => {
      const registered = teardowns.reverse();
      teardowns = [];
      await closing.resolves(runInOrder(registered), `its ${registered.length} teardown(s) end without an error`);
    });
    t.comment(costLine(name, started));
  }
  await closeIdleDatabases();
}

/** What a file cost, as a TAP comment (`npx tap -R tap test/<area>.test.ts | grep cost:`): where to look when an area grows slow. */
function costLine(name: string, started: { wall: number; cpu: NodeJS.CpuUsage }): string {
  const cpu = process.cpuUsage(started.cpu);
  const seconds = (value: number) => value.toFixed(1);
  return `cost: ${name} ${seconds((performance.now() - started.wall) / 1000)} s wall, ${seconds((cpu.user + cpu.system) / 1e6)} s CPU`;
}

async function runInOrder(steps: Array<() => unknown>): Promise<void> {
  for (const step of steps) await step();
}
