import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * What a tether-host executable was built from, so that a server started after `git pull` can tell that
 * the executable it offers is out of date (host-build.ts) without building anything: `scripts/build-host.ts`
 * writes `<executable>.sources.json` beside each executable, naming the files it bundled (paths relative to
 * the checkout) and one digest of their contents. A dependency is named by its `package.json` (its version),
 * never by its files: checking stays a few dozen small reads, and node_modules is never hashed.
 */
export interface SourcesRecord {
  /** Relative to the checkout, sorted. */
  files: string[];
  /** SHA-256 over each file's path and SHA-256. */
  digest: string;
}

export const sourcesRecordFile = (executable: string) => `${executable}.sources.json`;

/** The build's own scripts: a change to how it builds is a change to what it makes. */
export const BUILD_SCRIPTS = ["scripts/build-host.ts", "scripts/host-runtime.ts", "scripts/release-manifest.ts", "scripts/signing-keys.ts"];

/**
 * The files to record for esbuild's inputs (paths relative to the checkout): the checkout's own as they are,
 * each bundled package as its `package.json` (`node_modules/@scope/name/…` → `node_modules/@scope/name/package.json`).
 */
export function sourceFiles(inputs: readonly string[]): string[] {
  const files = new Set(BUILD_SCRIPTS);
  for (const input of inputs) {
    const normalized = input.split(path.sep).join("/");
    const at = normalized.lastIndexOf("node_modules/");
    if (at === -1) {
      files.add(normalized);
      continue;
    }
    const [first = "", second = ""] = normalized.slice(at + "node_modules/".length).split("/");
    files.add(`${normalized.slice(0, at)}node_modules/${first.startsWith("@") ? `${first}/${second}` : first}/package.json`);
  }
  return [...files].sort();
}

/** The digest of `files` as they are in `root` now; undefined when one of them is gone. */
export async function sourcesDigest(root: string, files: readonly string[]): Promise<string | undefined> {
  const all = createHash("sha256");
  for (const file of files) {
    let bytes: Buffer;
    try {
      bytes = await readFile(path.resolve(root, file));
    } catch {
      return undefined;
    }
    all.update(`${file}\0${createHash("sha256").update(bytes).digest("hex")}\n`);
  }
  return all.digest("hex");
}

export async function writeSourcesRecord(dir: string, executable: string, root: string, files: readonly string[]): Promise<void> {
  const sorted = [...files].sort();
  const digest = await sourcesDigest(root, sorted);
  if (digest === undefined) throw new Error(`build:host: a bundled file disappeared during the build (${sorted.join(", ")})`);
  await writeFile(path.join(dir, sourcesRecordFile(executable)), `${JSON.stringify({ files: sorted, digest } satisfies SourcesRecord, null, 2)}\n`);
}

/**
 * Whether `executable` in `dir` was built from the sources `root` has now: `same`, `other` (a file changed
 * or is gone), or `unknown` (no record: built before records existed, or by someone else).
 */
export async function compareSources(dir: string, executable: string, root: string): Promise<"same" | "other" | "unknown"> {
  let record: Partial<SourcesRecord>;
  try {
    record = JSON.parse(await readFile(path.join(dir, sourcesRecordFile(executable)), "utf8")) as Partial<SourcesRecord>;
  } catch {
    return "unknown";
  }
  if (!Array.isArray(record.files) || typeof record.digest !== "string" || !record.files.every((file) => typeof file === "string")) return "unknown";
  return (await sourcesDigest(root, record.files)) === record.digest ? "same" : "other";
}
