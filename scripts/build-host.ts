/// <reference path="./postject.d.ts" />
/**
 * `npm run build:host`: bundles `bin/host.ts` into one self-contained executable, `dist/tether-host`,
 * with Node's single executable application mechanism, fully offline:
 *
 *   1. esbuild → one CommonJS file (`dist/host/tether-host.cjs`; no top-level await, import.meta empty);
 *   2. `node --experimental-sea-config` → the preparation blob;
 *   3. a copy of the Node binary, with the blob injected by postject behind the SEA sentinel fuse.
 *
 * The result needs no Node on the target (same OS and architecture as the Node binary used). Never
 * strip it: the injected section goes with the symbols. `--if-stale` skips the build when the binary
 * is newer than every file that went into it (esbuild's metafile lists them). `--node <path>` embeds
 * another Node binary (same major version line, runnable here: it prepares its own blob).
 */
import { execFileSync } from "node:child_process";
import { chmod, copyFile, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { inject } from "postject";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SENTINEL_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

export interface BuildHostOptions {
  /** Skip when the binary is newer than all its inputs. */
  ifStale?: boolean;
  /** The Node binary to embed (default: the one running this script). */
  node?: string;
  log?: (line: string) => void;
}

export interface BuiltHost {
  executable: string;
  built: boolean;
}

export const HOST_EXECUTABLE = path.join(ROOT, "dist", process.platform === "win32" ? "tether-host.exe" : "tether-host");
const WORK_DIR = path.join(ROOT, "dist", "host");
const INPUTS_FILE = path.join(WORK_DIR, "inputs.json");

async function mtime(file: string): Promise<number | undefined> {
  try {
    return (await stat(file)).mtimeMs;
  } catch {
    return undefined;
  }
}

/** True when the executable exists and is newer than every input of its last build (and this script). */
export async function isFresh(): Promise<boolean> {
  const built = await mtime(HOST_EXECUTABLE);
  if (built === undefined) return false;
  let inputs: string[];
  try {
    inputs = JSON.parse(await readFile(INPUTS_FILE, "utf8")) as string[];
  } catch {
    return false;
  }
  for (const input of [...inputs, fileURLToPath(import.meta.url), path.join(ROOT, "package.json")]) {
    const changed = await mtime(path.resolve(ROOT, input));
    if (changed === undefined || changed > built) return false;
  }
  return true;
}

export async function buildHost(options: BuildHostOptions = {}): Promise<BuiltHost> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  if (options.ifStale && (await isFresh())) {
    log(`build:host: ${path.relative(ROOT, HOST_EXECUTABLE)} is up to date`);
    return { executable: HOST_EXECUTABLE, built: false };
  }
  const node = options.node ?? process.execPath;
  await mkdir(WORK_DIR, { recursive: true });
  const bundle = path.join(WORK_DIR, "tether-host.cjs");
  const blob = path.join(WORK_DIR, "sea-prep.blob");
  const seaConfig = path.join(WORK_DIR, "sea-config.json");

  // 1. One CommonJS file. A warning about import.meta means code that would break inside the binary.
  const result = await build({
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
  const fatal = result.warnings.filter((warning) => /import\.meta/.test(warning.text));
  if (fatal.length > 0) {
    throw new Error(`build:host: the bundle uses import.meta, which is empty in a single executable:\n${fatal.map((w) => `  ${w.location?.file}:${w.location?.line}: ${w.text}`).join("\n")}`);
  }
  const inputs = Object.keys(result.metafile.inputs);

  // 2. The preparation blob.
  await writeFile(seaConfig, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: false }, null, 2));
  execFileSync(node, ["--experimental-sea-config", seaConfig], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });

  // 3. A copy of Node with the blob injected; renamed into place only when complete.
  const temporary = `${HOST_EXECUTABLE}.tmp`;
  await rm(temporary, { force: true });
  await copyFile(node, temporary);
  await chmod(temporary, 0o755);
  if (process.platform === "darwin") execFileSync("codesign", ["--remove-signature", temporary]);
  await inject(temporary, "NODE_SEA_BLOB", await readFile(blob), {
    sentinelFuse: SENTINEL_FUSE,
    ...(process.platform === "darwin" ? { machoSegmentName: "NODE_SEA" } : {}),
  });
  if (process.platform === "darwin") execFileSync("codesign", ["--sign", "-", temporary]);
  await rename(temporary, HOST_EXECUTABLE);
  await writeFile(INPUTS_FILE, JSON.stringify(inputs, null, 2));
  const size = (await stat(HOST_EXECUTABLE)).size;
  log(`build:host: ${path.relative(ROOT, HOST_EXECUTABLE)} (${(size / 1024 / 1024).toFixed(0)} MB, ${inputs.length} sources bundled)`);
  return { executable: HOST_EXECUTABLE, built: true };
}

function argValue(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index === -1 ? undefined : process.argv[index + 1];
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const node = argValue("--node");
  buildHost({ ifStale: process.argv.includes("--if-stale"), ...(node ? { node: path.resolve(node) } : {}) }).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
