import { execFile } from "node:child_process";
import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { Test } from "tap";
import { buildHost, executableName, NATIVE_TARGET } from "../../scripts/build-host.js";
import { HOST_VERSION } from "../../src/device/version.js";
import { builtExecutable } from "./executable.js";

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "../..");

/** The version one patch above this package's: what the update tests offer as the next release. */
export const NEXT_VERSION = HOST_VERSION.replace(/\d+$/, (patch) => String(Number(patch) + 1));

export interface Releases {
  /** The executable built from these sources, as `npm run build:host` makes it (dist/tether-host). */
  current: string;
  /** A downloads directory holding the next release: its executable and its signed manifest. */
  next: { dir: string; executable: string; manifest: string; version: string };
}

/**
 * The current executable, and a real next release: the same sources built again as `NEXT_VERSION` into
 * dist/host/test-release (build:host's `version` option), signed with the same keys. Both are reused while
 * newer than their sources, so the second build costs a build only when the sources changed. A release
 * that is the same binary with a manifest claiming a higher version would not show that the new file is
 * what runs after the swap; this one answers `--version` with its own version.
 */
export async function releases(t: Test): Promise<Releases> {
  const current = await builtExecutable(t);
  const dir = path.join(ROOT, "dist", "host", "test-release");
  const built = await buildHost({ ifStale: true, version: NEXT_VERSION, outDir: dir, log: (line) => t.comment(line) });
  return { current, next: { dir, executable: built.executable, manifest: path.join(dir, "manifest.json"), version: NEXT_VERSION } };
}

/** A copy of `executable` in a directory of its own (so an update replaces the copy, never the build). */
export async function installedCopy(t: Test, executable: string): Promise<{ dir: string; path: string; others(): Promise<string[]> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-installed-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, executableName(NATIVE_TARGET).replace(/-[a-z0-9]+-[a-z0-9]+/, ""));
  await copyFile(executable, file);
  return { dir, path: file, others: async () => (await readdir(dir)).filter((name) => name !== path.basename(file)) };
}

/** `<executable> --version`: its version line and its runtime line. */
export async function versionOf(executable: string): Promise<{ version: string; runtime: string }> {
  const { stdout } = await run(executable, ["--version"], { timeout: 60_000 });
  const [version = "", runtime = ""] = stdout.split("\n");
  return { version, runtime };
}
