/// <reference path="./postject.d.ts" />
/**
 * `npm run build:host [-- --target <platform>] [--if-stale]`: bundles `bin/host.ts` into one
 * self-contained executable with Node's single executable application mechanism:
 *
 *   1. esbuild → one CommonJS file (`dist/host/tether-host.cjs`; no top-level await, import.meta empty);
 *   2. `node --experimental-sea-config` → the preparation blob;
 *   3. a copy of the target's Node binary, with the blob injected by postject behind the SEA fuse.
 *
 * Each build lands in `dist/downloads/tether-host-<target>[.exe]`, the directory the server offers for
 * download (see src/plugins/host/downloads.ts), with `manifest.json` naming the version. The native
 * target is also linked as `dist/tether-host`. Another target (`linux-arm64`, `win-x64`, …) embeds the
 * Node binary of npm's `node-<target>` package at exactly the version running this script, because a
 * SEA blob must be made by the same Node version as the binary it goes into; the package is fetched
 * once with `npm pack` (npm's cache keeps it) into `dist/host/runtimes/`.
 *
 * Never strip the result: the injected section goes with the symbols. `--if-stale` skips the build
 * when the binary is newer than every file that went into it (esbuild's metafile lists them).
 */
import { execFileSync } from "node:child_process";
import { chmod, copyFile, link, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { inject } from "postject";
import { HOST_VERSION } from "../src/device/version.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SENTINEL_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

/** Platforms a build can target: `<os>-<arch>` as npm's `node-<os>-<arch>` packages name them. */
export const HOST_TARGETS = ["linux-x64", "linux-arm64", "win-x64", "darwin-x64", "darwin-arm64"] as const;
export type HostTarget = (typeof HOST_TARGETS)[number];

export const NATIVE_TARGET = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}` as HostTarget;

export interface BuildHostOptions {
  /** The platform to build for (default: this machine's). */
  target?: HostTarget;
  /** Skip when the binary is newer than all its inputs. */
  ifStale?: boolean;
  /** The Node binary to embed for the native target (default: the one running this script). */
  node?: string;
  log?: (line: string) => void;
}

export interface BuiltHost {
  executable: string;
  target: HostTarget;
  built: boolean;
}

export const DOWNLOADS_DIR = path.join(ROOT, "dist", "downloads");
/** The native build, where `npm run build:host` has always put it. */
export const HOST_EXECUTABLE = path.join(ROOT, "dist", process.platform === "win32" ? "tether-host.exe" : "tether-host");
const WORK_DIR = path.join(ROOT, "dist", "host");

/** `tether-host-linux-arm64`, `tether-host-win-x64.exe`: the file name a download is served under. */
export function executableName(target: HostTarget): string {
  return `tether-host-${target}${target.startsWith("win-") ? ".exe" : ""}`;
}

export function executablePath(target: HostTarget): string {
  return path.join(DOWNLOADS_DIR, executableName(target));
}

async function mtime(file: string): Promise<number | undefined> {
  try {
    return (await stat(file)).mtimeMs;
  } catch {
    return undefined;
  }
}

const inputsFile = (target: HostTarget) => path.join(WORK_DIR, target, "inputs.json");

/** True when the target's executable exists and is newer than every input of its last build (and this script). */
export async function isFresh(target: HostTarget = NATIVE_TARGET): Promise<boolean> {
  const built = await mtime(executablePath(target));
  if (built === undefined) return false;
  if (target === NATIVE_TARGET && (await mtime(HOST_EXECUTABLE)) === undefined) return false;
  let inputs: string[];
  try {
    inputs = JSON.parse(await readFile(inputsFile(target), "utf8")) as string[];
  } catch {
    return false;
  }
  for (const input of [...inputs, fileURLToPath(import.meta.url), path.join(ROOT, "package.json")]) {
    const changed = await mtime(path.resolve(ROOT, input));
    if (changed === undefined || changed > built) return false;
  }
  return true;
}

/** The Node binary of npm's `node-<target>` package at this Node's exact version, fetched once. */
async function foreignNode(target: HostTarget, log: (line: string) => void): Promise<string> {
  const version = process.versions.node;
  const dir = path.join(WORK_DIR, "runtimes", `node-${target}-${version}`);
  const binary = path.join(dir, "package", "bin", target.startsWith("win-") ? "node.exe" : "node");
  if ((await mtime(binary)) !== undefined) return binary;
  await mkdir(dir, { recursive: true });
  log(`build:host: fetching node-${target}@${version} from the npm registry`);
  const packed = execFileSync("npm", ["pack", `node-${target}@${version}`, "--pack-destination", dir, "--silent"], { cwd: dir, encoding: "utf8" }).trim().split("\n").pop()!;
  execFileSync("tar", ["-xzf", path.join(dir, packed), "-C", dir, `package/bin/${path.basename(binary)}`]);
  await rm(path.join(dir, packed), { force: true });
  return binary;
}

/** Records the version the downloads directory offers (read by the server for its update notice). */
async function recordManifest(target: HostTarget): Promise<void> {
  const file = path.join(DOWNLOADS_DIR, "manifest.json");
  let targets: string[] = [];
  try {
    const previous = JSON.parse(await readFile(file, "utf8")) as { version?: string; targets?: string[] };
    if (previous.version === HOST_VERSION && Array.isArray(previous.targets)) targets = previous.targets;
  } catch {
    /* first build */
  }
  await writeFile(file, `${JSON.stringify({ version: HOST_VERSION, targets: [...new Set([...targets, target])].sort() }, null, 2)}\n`);
}

export async function buildHost(options: BuildHostOptions = {}): Promise<BuiltHost> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const target = options.target ?? NATIVE_TARGET;
  if (!HOST_TARGETS.includes(target)) throw new Error(`build:host: unknown target "${target}" (one of ${HOST_TARGETS.join(", ")})`);
  const output = executablePath(target);
  const result = (built: boolean): BuiltHost => ({ executable: target === NATIVE_TARGET ? HOST_EXECUTABLE : output, target, built });
  if (options.ifStale && (await isFresh(target))) {
    log(`build:host: ${path.relative(ROOT, output)} is up to date`);
    return result(false);
  }
  const node = target === NATIVE_TARGET ? (options.node ?? process.execPath) : await foreignNode(target, log);
  const work = path.join(WORK_DIR, target);
  await mkdir(work, { recursive: true });
  await mkdir(DOWNLOADS_DIR, { recursive: true });
  // Per-process names: test files build in parallel, and each file only ever renames a complete result into place.
  const bundle = path.join(work, `tether-host.${process.pid}.cjs`);
  const blob = path.join(work, `sea-prep.${process.pid}.blob`);
  const seaConfig = path.join(work, `sea-config.${process.pid}.json`);

  // 1. One CommonJS file, everything bundled (undici included): the executable's `require` loads
  // built-ins only. A warning about import.meta means code that would break inside the binary.
  const bundled = await build({
    entryPoints: [path.join(ROOT, "bin", "host.ts")],
    outfile: bundle,
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    metafile: true,
    legalComments: "none",
    logLevel: "silent",
  });
  const fatal = bundled.warnings.filter((warning) => /import\.meta/.test(warning.text));
  if (fatal.length > 0) {
    throw new Error(`build:host: the bundle uses import.meta, which is empty in a single executable:\n${fatal.map((w) => `  ${w.location?.file}:${w.location?.line}: ${w.text}`).join("\n")}`);
  }
  const inputs = Object.keys(bundled.metafile.inputs);

  // 2. The preparation blob, made by this Node: the same version as the embedded binary (a foreign
  // target's package is fetched at exactly this version), which is what the blob format requires.
  await writeFile(seaConfig, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: false }, null, 2));
  execFileSync(target === NATIVE_TARGET ? node : process.execPath, ["--experimental-sea-config", seaConfig], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });

  // 3. A copy of Node with the blob injected; renamed into place only when complete.
  const mac = target.startsWith("darwin-");
  const temporary = `${output}.${process.pid}.tmp`;
  await rm(temporary, { force: true });
  await copyFile(node, temporary);
  await chmod(temporary, 0o755);
  if (mac && process.platform === "darwin") execFileSync("codesign", ["--remove-signature", temporary]);
  await inject(temporary, "NODE_SEA_BLOB", await readFile(blob), { sentinelFuse: SENTINEL_FUSE, ...(mac ? { machoSegmentName: "NODE_SEA" } : {}) });
  if (mac && process.platform === "darwin") execFileSync("codesign", ["--sign", "-", temporary]);
  await rename(temporary, output);
  if (target === NATIVE_TARGET) {
    // The same file under its historical name (a hard link: no second 99 MB), swapped in atomically.
    const alias = `${HOST_EXECUTABLE}.${process.pid}.tmp`;
    await rm(alias, { force: true });
    await link(output, alias).catch(() => copyFile(output, alias));
    await rename(alias, HOST_EXECUTABLE);
  }
  await Promise.all([bundle, blob, seaConfig].map((file) => rm(file, { force: true })));
  await writeFile(inputsFile(target), JSON.stringify(inputs, null, 2));
  await recordManifest(target);
  const size = (await stat(output)).size;
  log(`build:host: ${path.relative(ROOT, output)} (${(size / 1024 / 1024).toFixed(0)} MB, ${inputs.length} sources bundled, Node ${process.versions.node})`);
  return result(true);
}

function argValue(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index === -1 ? undefined : process.argv[index + 1];
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const node = argValue("--node");
  const target = argValue("--target") as HostTarget | undefined;
  buildHost({ ifStale: process.argv.includes("--if-stale"), ...(target ? { target } : {}), ...(node ? { node: path.resolve(node) } : {}) }).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
