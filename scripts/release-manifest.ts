/**
 * The signed manifest beside the executables (`<downloads>/manifest.json`, format in src/protocol/manifest.ts):
 * each build adds its platform's entry (size and SHA-256 of the file it just wrote) and signs the whole again.
 * Builds of several targets may run at once (test files do), so the read-modify-write happens under a lock
 * file; entries built as another version or another Node, or whose file is gone or changed size, are dropped.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { MANIFEST_FILE, MANIFEST_FORMAT, signManifest, type ManifestBody, type ManifestEntry, type SignedManifest } from "../src/protocol/manifest.js";
import type { SigningKeys } from "./signing-keys.js";

export async function sha256File(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Runs `work` holding `<dir>/.manifest.lock`; a lock left by a process that died is taken over. */
async function withLock<T>(dir: string, work: () => Promise<T>): Promise<T> {
  const lock = path.join(dir, ".manifest.lock");
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      const handle = await open(lock, "wx");
      await handle.writeFile(String(process.pid));
      await handle.close();
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const holder = Number(await readFile(lock, "utf8").catch(() => ""));
      if (Number.isInteger(holder) && holder > 0 && !alive(holder)) await rm(lock, { force: true });
      else if (Date.now() > deadline) throw new Error(`build:host: ${lock} is held by process ${holder}; remove it if no build is running`, { cause: error });
      else await delay(100); // a build script waiting its turn, not a test
    }
  }
  try {
    return await work();
  } finally {
    await rm(lock, { force: true });
  }
}

async function previousEntries(dir: string, version: string, node: string): Promise<Record<string, ManifestEntry>> {
  let manifest: Partial<SignedManifest>;
  try {
    manifest = JSON.parse(await readFile(path.join(dir, MANIFEST_FILE), "utf8")) as Partial<SignedManifest>;
  } catch {
    return {};
  }
  if (manifest.signed?.version !== version || manifest.signed.node !== node || typeof manifest.signed.files !== "object") return {};
  const kept: Record<string, ManifestEntry> = {};
  for (const [platform, entry] of Object.entries(manifest.signed.files)) {
    const size = await stat(path.join(dir, entry.file)).then(
      (info) => info.size,
      () => -1,
    );
    if (size === entry.size) kept[platform] = entry;
  }
  return kept;
}

/**
 * Moves the new executable into place (`place`) and adds (or replaces) `platform`'s entry for it, signing the
 * manifest again; both under the lock, so the manifest always describes the files beside it.
 */
export async function recordRelease(args: {
  dir: string;
  platform: string;
  file: string;
  version: string;
  node: string;
  keys: SigningKeys;
  place: () => Promise<void>;
}): Promise<SignedManifest> {
  const { dir, platform, file, version, node, keys } = args;
  return withLock(dir, async () => {
    await args.place();
    const files = await previousEntries(dir, version, node);
    files[platform] = { file, size: (await stat(path.join(dir, file))).size, sha256: await sha256File(path.join(dir, file)) };
    const body: ManifestBody = {
      format: MANIFEST_FORMAT,
      version,
      node,
      files: Object.fromEntries(Object.entries(files).sort(([a], [b]) => a.localeCompare(b))),
    };
    const manifest = signManifest(body, keys.privateKeys);
    const target = path.join(dir, MANIFEST_FILE);
    const temporary = `${target}.${process.pid}.tmp`;
    await writeFile(temporary, `${JSON.stringify(manifest, null, 2)}\n`);
    await rename(temporary, target);
    return manifest;
  });
}
