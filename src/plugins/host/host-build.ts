import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { setPriority } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { compareSources } from "./build-sources.js";

/**
 * Development: after `npm install && npm start`, `/devices` offers a tether-host for this machine with no
 * further command. When the downloads directory has none, the server builds it in the background (a child
 * process running `scripts/build-host.ts`, at low priority, so pages stay quick), and says so on the page
 * meanwhile. `HOST_BUILD_ON_START` turns it off (tests, production, where the operator builds releases).
 *
 * The state is a small file in the downloads directory (`build-status.json`), so every process serving that
 * directory reads the same answer: preparing (with the builder's process id: a builder that died is not
 * preparing any more), or failed (with the reason). A finished build removes it: the executable is there.
 *
 * After a `git pull` that changed the device's code, the executable there is out of date: each build records
 * what it was built from (build-sources.ts), and a server that finds other sources in its checkout builds it
 * again, the same way (the page says "preparing" and stops offering the old file meanwhile). It replaces only
 * what this checkout's builder made: never in production (the operator's releases), never an executable
 * without a record in a `DOWNLOADS_DIR` other than the builder's own `dist/downloads`.
 */
export const BUILD_STATUS_FILE = "build-status.json";

export type HostBuildStatus =
  | { state: "preparing"; platform: string; startedAt: string; pid: number; /** The one there was built from other sources. */ replacing?: boolean }
  | { state: "failed"; platform: string; reason: string }
  | { state: "unavailable"; platform: string; reason: string };

/** Platforms `npm run build:host` can make, as downloads name them. */
export const BUILDABLE_PLATFORMS = ["linux-x64", "linux-arm64", "win-x64", "darwin-x64", "darwin-arm64"] as const;

/** This machine, as downloads name platforms: `linux-x64`, `darwin-arm64`, `win-x64`. */
export const SERVER_PLATFORM = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}`;

const executableFile = (platform: string) => `tether-host-${platform}${platform.startsWith("win-") ? ".exe" : ""}`;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The build state in `dir`, or undefined when nothing is being built and nothing failed. */
export async function readBuildStatus(dir: string): Promise<HostBuildStatus | undefined> {
  let status: HostBuildStatus;
  try {
    status = JSON.parse(await readFile(path.join(dir, BUILD_STATUS_FILE), "utf8")) as HostBuildStatus;
  } catch {
    return undefined;
  }
  if (status.state === "preparing" && !processAlive(status.pid)) {
    return { state: "failed", platform: status.platform, reason: "the build stopped before it finished (the server was stopped?)" };
  }
  return status;
}

const BUILD_SCRIPT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../scripts/build-host.ts");
const CHECKOUT = path.resolve(BUILD_SCRIPT, "../..");
/** Where `npm run build:host` puts executables when not told otherwise (scripts/build-host.ts). */
const BUILDER_DOWNLOADS_DIR = path.join(CHECKOUT, "dist", "downloads");

export interface PrepareOptions {
  downloadsDir: string;
  log: { info(message: string): void; warn(message: string): void };
  /** The builder to run (default: `node --import tsx scripts/build-host.ts --out-dir <dir>`); tests pass a stand-in. */
  command?: readonly string[];
  /** The platform to prepare (default: this machine's). */
  platform?: string;
  /** Production: build only when there is none, never replace an executable (the operator's releases). */
  production?: boolean;
  /** The checkout whose sources an executable is compared with (default: this one); tests pass another. */
  sourceRoot?: string;
}

/**
 * Whether the executable in `dir` must be built again: it was built from other sources than the checkout
 * has now (or, in the builder's own directory, before builds recorded their sources). Never in production.
 */
async function outdated(options: PrepareOptions, dir: string, file: string): Promise<boolean> {
  const sources = await compareSources(dir, file, options.sourceRoot ?? CHECKOUT);
  if (sources === "same") return false;
  if (sources === "unknown" && path.resolve(dir) !== BUILDER_DOWNLOADS_DIR) return false; // someone else's file
  if (options.production) {
    options.log.warn(`${file} in ${dir} was not built from this checkout's sources; in production it is kept (npm run build:host replaces it)`);
    return false;
  }
  return true;
}

export interface PreparedBuild {
  /** The builder, while it runs (the server ends it when it stops). */
  child: ChildProcess | undefined;
  /** Settles when the build has finished, failed or was not needed. */
  done: Promise<HostBuildStatus | undefined>;
}

/** Starts the background build when `downloadsDir` has no executable for this machine, or an outdated one; see the module comment. */
export async function prepareHostExecutable(options: PrepareOptions): Promise<PreparedBuild> {
  const dir = options.downloadsDir;
  const platform = options.platform ?? SERVER_PLATFORM;
  const write = async (status: HostBuildStatus | undefined) => {
    if (status) await writeFile(path.join(dir, BUILD_STATUS_FILE), `${JSON.stringify(status)}\n`);
    else await rm(path.join(dir, BUILD_STATUS_FILE), { force: true });
    return status;
  };
  await mkdir(dir, { recursive: true });
  const exists = await stat(path.join(dir, executableFile(platform))).then(
    () => true,
    () => false,
  );
  const replacing = exists && (await outdated(options, dir, executableFile(platform)));
  if (exists && !replacing) return { child: undefined, done: write(undefined) };
  if (!(BUILDABLE_PLATFORMS as readonly string[]).includes(platform)) {
    const status = { state: "unavailable", platform, reason: `tether-host is not built for ${platform}` } as const;
    return { child: undefined, done: write(status) };
  }
  const command = options.command ?? [process.execPath, "--import", "tsx", BUILD_SCRIPT, "--if-stale", "--out-dir", dir];
  if (!options.command && !existsSync(BUILD_SCRIPT)) {
    const status = { state: "unavailable", platform, reason: "this installation has no build script (scripts/build-host.ts)" } as const;
    return { child: undefined, done: write(status) };
  }

  const child = spawn(command[0]!, command.slice(1), { cwd: path.resolve(BUILD_SCRIPT, "../.."), stdio: ["pipe", "ignore", "pipe"] });
  try {
    if (child.pid !== undefined) setPriority(child.pid, 10); // behind the server's own work
  } catch {
    /* not permitted here: it builds at normal priority */
  }
  await write({ state: "preparing", platform, startedAt: new Date().toISOString(), pid: child.pid ?? process.pid, ...(replacing ? { replacing } : {}) });
  const why = replacing ? " (the one there was built from other sources than this checkout's)" : "";
  options.log.info(`building tether-host for ${platform} in the background${why} (HOST_BUILD_ON_START=false turns this off)`);
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
  const done = new Promise<HostBuildStatus | undefined>((resolve) => {
    let finished = false;
    const finish = (code: number | null, error?: Error) => {
      if (finished) return;
      finished = true;
      const reason = error?.message ?? stderr.trim().split("\n").filter(Boolean).pop() ?? `the build exited with ${code}`;
      if (code === 0) options.log.info(`tether-host for ${platform} is ready in ${dir}`);
      else options.log.warn(`tether-host for ${platform} could not be built: ${reason}`);
      resolve(write(code === 0 ? undefined : { state: "failed", platform, reason }).catch(() => undefined));
    };
    child.once("error", (error) => finish(null, error));
    child.once("exit", (code) => finish(code));
  });
  return { child, done };
}
