/**
 * `npm run build:host [-- --target <platform>] [--node-version 24.x.y] [--if-stale] [--out-dir <dir>]`: bundles `bin/host.ts`
 * into one self-contained executable with Node's single executable application mechanism:
 *
 *   1. esbuild → one CommonJS file (no top-level await, import.meta empty), with the version and the
 *      release public keys built in;
 *   2. `node --experimental-sea-config` → the preparation blob, made by npm's `node-<this machine>` at
 *      the pinned Node LTS (scripts/host-runtime.ts);
 *   3. a copy of npm's `node-<target>` binary at that same version, with the blob injected by postject
 *      behind the SEA fuse;
 *   4. `manifest.json` beside it: the version and every platform's size and SHA-256, signed with Ed25519
 *      (scripts/signing-keys.ts, scripts/release-manifest.ts).
 *
 * Each build lands in `dist/downloads/tether-host-<target>[.exe]`, the directory the server offers for
 * download (see src/plugins/host/downloads.ts). The native target is also linked as `dist/tether-host`.
 * Every target embeds the same pinned Node (the server keeps running on the machine's own), because a
 * SEA blob must be made by the same Node version as the binary it goes into; npm's packages are fetched
 * once with `npm pack` (npm's cache keeps them) into `dist/host/runtimes/`.
 *
 * Never strip the result: the injected section goes with the symbols. `--if-stale` skips the build
 * when the binary is newer than every file that went into it (esbuild's metafile lists them), those
 * files still have the contents it was built from (`<executable>.sources.json`, which the server also
 * checks at start: src/plugins/host/build-sources.ts), and it was built with the same version, Node and keys.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, copyFile, link, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { inject } from "postject";
import { HOST_VERSION } from "../src/device/version.js";
import { compareSources, sourceFiles, writeSourcesRecord } from "../src/plugins/host/build-sources.js";
import { parseVersion } from "../src/protocol/versions.js";
import { hostNodeVersion, nodeRuntime } from "./host-runtime.js";
import { recordRelease } from "./release-manifest.js";
import { describeKeys, loadSigningKeys } from "./signing-keys.js";

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
  /** A local Node binary to embed for the native target instead of npm's (it makes its own blob). */
  node?: string;
  /** The Node version to embed (default: scripts/host-runtime.ts's pin, or `TETHER_HOST_NODE_VERSION`). */
  nodeVersion?: string;
  /**
   * Build as another tether-host version than src/device/version.ts's, into `outDir`: how the update
   * tests make a real newer release without touching the sources.
   */
  version?: string;
  /** Where the executable and its manifest go (default `dist/downloads`). */
  outDir?: string;
  log?: (line: string) => void;
}

/**
 * Something a build needs is missing on this machine and could not be fetched (a foreign target's
 * Node runtime, offline): the build never started. Every other error is a build that was attempted
 * and failed.
 */
export class HostPrerequisiteMissing extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "HostPrerequisiteMissing";
  }
}

export interface BuiltHost {
  executable: string;
  target: HostTarget;
  built: boolean;
  /** The public keys built in (base64 SubjectPublicKeyInfo): what its `update` trusts. */
  trustedKeys: string[];
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

/** Per output directory and target: the default one keeps its historical place. */
const inputsFile = (target: HostTarget, outDir: string) =>
  path.join(WORK_DIR, target, outDir === DOWNLOADS_DIR ? "inputs.json" : `inputs-${createHash("sha256").update(outDir).digest("hex").slice(0, 12)}.json`);

/** What besides the sources makes a build: a change to any of them means building again. */
const fingerprintOf = (parts: { version: string; node: string; trustedKeys: string[] }) => createHash("sha256").update(JSON.stringify(parts)).digest("hex");

/**
 * True when the target's executable exists, is newer than every input of its last build (and these
 * scripts), and was built with this `fingerprint` (version, Node, keys).
 */
export async function isFresh(target: HostTarget = NATIVE_TARGET, outDir = DOWNLOADS_DIR, fingerprint?: string): Promise<boolean> {
  const output = path.join(outDir, executableName(target));
  const built = await mtime(output);
  if (built === undefined) return false;
  if (target === NATIVE_TARGET && outDir === DOWNLOADS_DIR && (await mtime(HOST_EXECUTABLE)) === undefined) return false;
  if ((await mtime(path.join(outDir, "manifest.json"))) === undefined) return false;
  if ((await compareSources(outDir, executableName(target), ROOT)) !== "same") return false;
  let inputs: string[];
  try {
    const recorded = JSON.parse(await readFile(inputsFile(target, outDir), "utf8")) as {
      fingerprint?: string;
      inputs?: string[];
    };
    if (!Array.isArray(recorded.inputs) || (fingerprint !== undefined && recorded.fingerprint !== fingerprint)) return false;
    inputs = recorded.inputs;
  } catch {
    return false;
  }
  const scripts = ["build-host.ts", "host-runtime.ts", "release-manifest.ts", "signing-keys.ts"].map((file) => path.join(ROOT, "scripts", file));
  for (const input of [...inputs, ...scripts, path.join(ROOT, "package.json")]) {
    const changed = await mtime(path.resolve(ROOT, input));
    if (changed === undefined || changed > built) return false;
  }
  return true;
}

export async function buildHost(options: BuildHostOptions = {}): Promise<BuiltHost> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const target = options.target ?? NATIVE_TARGET;
  if (!HOST_TARGETS.includes(target)) throw new Error(`build:host: unknown target "${target}" (one of ${HOST_TARGETS.join(", ")})`);
  const version = options.version ?? HOST_VERSION;
  if (!parseVersion(version)) throw new Error(`build:host: "${version}" is not a version`);
  const outDir = path.resolve(options.outDir ?? DOWNLOADS_DIR);
  const nativeAlias = target === NATIVE_TARGET && outDir === DOWNLOADS_DIR;
  const output = path.join(outDir, executableName(target));
  const keys = await loadSigningKeys();
  // A local --node binary for the native target embeds itself at its own version; otherwise the pinned one from npm.
  const localNode = target === NATIVE_TARGET ? options.node : undefined;
  const nodeVersion = localNode
    ? execFileSync(localNode, ["--version"], { encoding: "utf8" }).trim().replace(/^v/, "")
    : (options.nodeVersion ?? hostNodeVersion());
  const fingerprint = fingerprintOf({
    version,
    node: localNode ? `${localNode}@${nodeVersion}` : nodeVersion,
    trustedKeys: keys.trustedKeys,
  });
  const result = (built: boolean): BuiltHost => ({
    executable: nativeAlias ? HOST_EXECUTABLE : output,
    target,
    built,
    trustedKeys: keys.trustedKeys,
  });
  if (options.ifStale && (await isFresh(target, outDir, fingerprint))) {
    log(`build:host: ${path.relative(ROOT, output)} is up to date`);
    return result(false);
  }
  // The blob is made by this machine's Node at the embedded version; the embedded binary is the target's.
  // npm's runtime that cannot be fetched (offline) is a missing prerequisite, not a failed build.
  const runtime = (platform: HostTarget) =>
    nodeRuntime(platform, nodeVersion, log).catch((error: unknown) => {
      throw new HostPrerequisiteMissing((error as Error).message, {
        cause: error,
      });
    });
  const blobNode = localNode ?? (await runtime(NATIVE_TARGET));
  const node = localNode ?? (target === NATIVE_TARGET ? blobNode : await runtime(target));
  const work = path.join(WORK_DIR, target);
  await mkdir(work, { recursive: true });
  await mkdir(outDir, { recursive: true });
  // Per-process names: test files build in parallel, and each file only ever renames a complete result into place.
  const bundle = path.join(work, `tether-host.${process.pid}.cjs`);
  const blob = path.join(work, `sea-prep.${process.pid}.blob`);
  const seaConfig = path.join(work, `sea-config.${process.pid}.json`);

  const mac = target.startsWith("darwin-");
  const temporary = `${output}.${process.pid}.tmp`;
  let inputs: string[];
  try {
    // 1. One CommonJS file, everything bundled (undici included): the executable's `require` loads
    // built-ins only. A warning about import.meta means code that would break inside the binary.
    const bundled = await build({
      entryPoints: [path.join(ROOT, "bin", "host.ts")],
      absWorkingDir: ROOT, // the metafile's paths are relative to the checkout, as the sources record wants them
      outfile: bundle,
      bundle: true,
      platform: "node",
      format: "cjs",
      target: `node${nodeVersion.split(".")[0]}`,
      metafile: true,
      legalComments: "none",
      logLevel: "silent",
      // What `update` verifies releases with, and the version it compares them to (src/device/update-keys.ts, version.ts).
      define: {
        __TETHER_HOST_VERSION__: JSON.stringify(version),
        __TETHER_UPDATE_KEYS__: JSON.stringify(keys.trustedKeys),
      },
    });
    const fatal = bundled.warnings.filter((warning) => /import\.meta/.test(warning.text));
    if (fatal.length > 0) {
      throw new Error(
        `build:host: the bundle uses import.meta, which is empty in a single executable:\n${fatal.map((w) => `  ${w.location?.file}:${w.location?.line}: ${w.text}`).join("\n")}`,
      );
    }
    // Files only: esbuild also lists each `define` as a pseudo-input (`<define:…>`), which the fingerprint covers.
    inputs = Object.keys(bundled.metafile.inputs).filter((input) => !input.startsWith("<"));

    // 2. The preparation blob, made by the same Node version as the embedded binary, as the blob format requires.
    await writeFile(
      seaConfig,
      JSON.stringify(
        {
          main: bundle,
          output: blob,
          disableExperimentalSEAWarning: true,
          useCodeCache: false,
        },
        null,
        2,
      ),
    );
    execFileSync(blobNode, ["--experimental-sea-config", seaConfig], {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "pipe"],
    });

    // 3. A copy of Node with the blob injected; renamed into place only when complete, with its manifest entry.
    await rm(temporary, { force: true });
    await copyFile(node, temporary);
    await chmod(temporary, 0o755);
    if (mac && process.platform === "darwin") execFileSync("codesign", ["--remove-signature", temporary]);
    await inject(temporary, "NODE_SEA_BLOB", await readFile(blob), {
      sentinelFuse: SENTINEL_FUSE,
      ...(mac ? { machoSegmentName: "NODE_SEA" } : {}),
    });
    if (mac && process.platform === "darwin") execFileSync("codesign", ["--sign", "-", temporary]);

    // 4. The signed manifest, naming this file's size and digest next to the other platforms'.
    await recordRelease({
      dir: outDir,
      platform: target,
      file: executableName(target),
      version,
      node: nodeVersion,
      keys,
      place: () => rename(temporary, output),
    });
    if (nativeAlias) {
      // The same file under its historical name (a hard link: no second copy), swapped in atomically.
      const alias = `${HOST_EXECUTABLE}.${process.pid}.tmp`;
      await rm(alias, { force: true });
      await link(output, alias).catch(() => copyFile(output, alias));
      await rename(alias, HOST_EXECUTABLE);
    }
  } finally {
    // A failed step leaves no half-made files behind (the outputs are only ever renamed into place).
    await Promise.all([bundle, blob, seaConfig, temporary].map((file) => rm(file, { force: true })));
  }
  await writeFile(inputsFile(target, outDir), JSON.stringify({ fingerprint, inputs }, null, 2));
  await writeSourcesRecord(outDir, executableName(target), ROOT, sourceFiles(inputs));
  const size = (await stat(output)).size;
  log(
    `build:host: ${path.relative(ROOT, output)} ${version} (${(size / 1024 / 1024).toFixed(0)} MB, ${inputs.length} sources bundled, Node ${nodeVersion}; ${describeKeys(keys)})`,
  );
  return result(true);
}

function argValue(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index === -1 ? undefined : process.argv[index + 1];
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const node = argValue("--node");
  const target = argValue("--target") as HostTarget | undefined;
  const nodeVersion = argValue("--node-version");
  const outDir = argValue("--out-dir");
  buildHost({
    ...(outDir ? { outDir: path.resolve(outDir) } : {}),
    ifStale: process.argv.includes("--if-stale"),
    ...(target ? { target } : {}),
    ...(node ? { node: path.resolve(node) } : {}),
    ...(nodeVersion ? { nodeVersion } : {}),
  }).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
