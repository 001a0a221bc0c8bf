import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { open, readdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { isOlderVersion, MANIFEST_FILE, MAX_MANIFEST_BYTES, verifyManifest, type ManifestEntry } from "../protocol/index.js";
import type { DeviceRequest } from "./http.js";
import { HOST_AGENT } from "./version.js";

export interface UpdateArgs {
  /** The server's base address: the manifest is `<server>/downloads/manifest.json`. */
  server: string;
  request: DeviceRequest;
  /** The file to replace (the running executable). */
  executable: string;
  /** The version running now, and its platform (`linux-x64`, …). */
  version: string;
  platform: string;
  /** The release public keys built in (base64 SubjectPublicKeyInfo). */
  trustedKeys: readonly string[];
  log: (line: string) => void;
  signal?: AbortSignal;
}

export type UpdateOutcome =
  | { status: "updated"; from: string; to: string }
  | { status: "current"; version: string }
  | { status: "failed"; from: string; to?: string; code: string; message: string };

/** Why an update failed; the code goes to the server with the report. */
class UpdateFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** How long the new executable may take to answer `--version` before it counts as broken. */
const SMOKE_TEST_MS = 60_000;

/**
 * `tether-host update`: fetches the server's signed manifest, verifies its signature with the built-in keys,
 * refuses a downgrade, downloads this platform's executable into a temporary file next to the running one
 * (same file system, so the final rename is atomic), checks its size and SHA-256 against the manifest, runs
 * it once (`--version` must name the manifest's version: a build that cannot start on this machine is
 * caught here, not by a service manager restarting it forever), and only then renames it over the old file.
 * Any failure removes the temporary file and leaves the old executable exactly as it was.
 */
export async function updateExecutable(args: UpdateArgs): Promise<UpdateOutcome> {
  const { version: from } = args;
  let to: string | undefined;
  try {
    if (args.trustedKeys.length === 0) {
      throw new UpdateFailure(
        "UPDATE_UNAVAILABLE",
        "This tether-host has no release keys built in (it runs from the sources or the npm package): update it the way it was installed",
      );
    }
    const manifest = await fetchManifest(args);
    const verdict = verifyManifest(manifest, args.trustedKeys);
    if (!verdict.ok) throw new UpdateFailure(verdict.code, verdict.message);
    to = verdict.manifest.version;
    if (to === from) return { status: "current", version: from };
    if (!isOlderVersion(from, to))
      throw new UpdateFailure("UPDATE_DOWNGRADE", `The server offers ${to}, which is not newer than this ${from}: a downgrade is refused`);
    const entry = verdict.manifest.files[args.platform];
    if (!entry) throw new UpdateFailure("UPDATE_NOT_BUILT", `The server's release ${to} has no executable for ${args.platform}`);
    args.log(
      `tether-host: updating ${from} → ${to}: downloading ${entry.file} (${(entry.size / 1024 / 1024).toFixed(0)} MB, release signed by key ${verdict.keyId})`,
    );
    await replaceWith(args, entry, to);
    args.log(`tether-host: updated ${from} → ${to} (${args.executable}); the next start runs ${to}`);
    return { status: "updated", from, to };
  } catch (error) {
    const failure =
      error instanceof UpdateFailure
        ? error
        : new UpdateFailure(
            args.signal?.aborted ? "UPDATE_ABORTED" : "UPDATE_FAILED",
            error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error),
          );
    args.log(`tether-host: update failed (${failure.code}): ${failure.message}; ${from} stays in place`);
    return { status: "failed", from, ...(to ? { to } : {}), code: failure.code, message: failure.message };
  }
}

const headers = { "user-agent": HOST_AGENT, accept: "application/json" };

async function fetchManifest(args: UpdateArgs): Promise<unknown> {
  const url = `${args.server}/downloads/${MANIFEST_FILE}`;
  let response;
  try {
    response = await args.request(url, { headers, ...(args.signal ? { signal: args.signal } : {}) });
  } catch (error) {
    throw new UpdateFailure(
      "UPDATE_MANIFEST_UNAVAILABLE",
      `Cannot fetch ${url}: ${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}`,
    );
  }
  if (!response.ok) {
    await response.text().catch(() => "");
    throw new UpdateFailure(
      "UPDATE_MANIFEST_UNAVAILABLE",
      `${url} answered ${response.status}${response.status === 404 ? ": the server offers no signed release" : ""}`,
    );
  }
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of response.body) {
    length += chunk.byteLength;
    if (length > MAX_MANIFEST_BYTES) throw new UpdateFailure("MANIFEST_INVALID", `The release manifest is larger than ${MAX_MANIFEST_BYTES} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new UpdateFailure("MANIFEST_INVALID", "The release manifest is not JSON");
  }
}

/** Download → temporary file beside the executable → size, digest, a trial run → rename over the executable. */
async function replaceWith(args: UpdateArgs, entry: ManifestEntry, to: string): Promise<void> {
  const directory = path.dirname(args.executable);
  const temporary = path.join(directory, `.${path.basename(args.executable)}.${process.pid}.update`);
  await removeLeftovers(directory, path.basename(args.executable));
  const mode =
    ((await stat(args.executable).then(
      (info) => info.mode,
      () => 0o755,
    )) &
      0o777) |
    0o700;
  let placed = false;
  try {
    let handle;
    try {
      handle = await open(temporary, "w", mode);
    } catch (error) {
      throw new UpdateFailure(
        "UPDATE_WRITE_FAILED",
        `Cannot write next to ${args.executable}: ${(error as Error).message}. Update as the user who owns it, or move it somewhere that user can write`,
      );
    }
    const hash = createHash("sha256");
    let received = 0;
    try {
      const url = `${args.server}/downloads/${encodeURIComponent(entry.file)}`;
      let response;
      try {
        response = await args.request(url, { headers: { "user-agent": HOST_AGENT }, ...(args.signal ? { signal: args.signal } : {}) });
      } catch (error) {
        throw new UpdateFailure(
          "UPDATE_DOWNLOAD_FAILED",
          `Cannot download ${url}: ${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}`,
        );
      }
      if (!response.ok) {
        await response.text().catch(() => "");
        throw new UpdateFailure("UPDATE_DOWNLOAD_FAILED", `${url} answered ${response.status}`);
      }
      try {
        for await (const chunk of response.body) {
          received += chunk.byteLength;
          // More than announced is wrong already: stop reading rather than fill the disk.
          if (received > entry.size) throw new UpdateFailure("UPDATE_SIZE_MISMATCH", `The download is larger than the ${entry.size} bytes the manifest names`);
          hash.update(chunk);
          await handle.write(chunk);
        }
      } catch (error) {
        if (error instanceof UpdateFailure) throw error;
        throw new UpdateFailure("UPDATE_DOWNLOAD_FAILED", `The download broke off after ${received} bytes: ${(error as Error).message}`);
      }
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (received !== entry.size)
      throw new UpdateFailure("UPDATE_SIZE_MISMATCH", `Downloaded ${received} bytes; the manifest names ${entry.size} (a truncated download)`);
    const digest = hash.digest("hex");
    if (digest !== entry.sha256)
      throw new UpdateFailure("UPDATE_DIGEST_MISMATCH", `The download's SHA-256 is ${digest}; the signed manifest names ${entry.sha256}`);
    await trialRun(temporary, to);
    await swapInto(temporary, args.executable);
    placed = true;
  } finally {
    if (!placed) await rm(temporary, { force: true });
  }
}

/** Downloads of an update that was killed midway (its process is gone): the old executable never depended on them. */
async function removeLeftovers(directory: string, base: string): Promise<void> {
  const names = await readdir(directory).catch(() => [] as string[]);
  for (const name of names) {
    if (!name.startsWith(`.${base}.`) || !name.endsWith(".update")) continue;
    const pid = Number(name.slice(base.length + 2, -".update".length));
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let alive = true;
    try {
      process.kill(pid, 0);
    } catch (error) {
      alive = (error as NodeJS.ErrnoException).code === "EPERM";
    }
    if (!alive) await rm(path.join(directory, name), { force: true });
  }
}

/** Runs the new executable once, `--version`: its first line must be the version the manifest promised. */
function trialRun(file: string, expected: string): Promise<void> {
  return new Promise((resolve, reject) => {
    // This process's environment: Windows needs SystemRoot and friends to start any program.
    execFile(file, ["--version"], { timeout: SMOKE_TEST_MS, windowsHide: true }, (error, stdout, stderr) => {
      const said = stdout.split(/\r?\n/)[0]?.trim();
      if (!error && said === expected) return resolve();
      const why = error ? `${error.message.split("\n")[0]}${stderr ? `: ${stderr.trim().split("\n")[0]}` : ""}` : `it says ${JSON.stringify(said)}`;
      reject(new UpdateFailure("UPDATE_TRIAL_RUN_FAILED", `The downloaded ${expected} does not run here (${why})`));
    });
  });
}

/**
 * The rename that makes the update. On Windows a running executable cannot be replaced but can be renamed:
 * the old one moves aside to `<name>.old` (removed at the next start) first, and comes back if the swap fails.
 */
async function swapInto(temporary: string, executable: string): Promise<void> {
  if (process.platform !== "win32") {
    await rename(temporary, executable);
    // The rename itself must reach the disk before the process says it updated.
    const directory = await open(path.dirname(executable), "r").catch(() => undefined);
    await directory?.sync().catch(() => {});
    await directory?.close();
    return;
  }
  const aside = `${executable}.old`;
  await rm(aside, { force: true });
  await rename(executable, aside);
  try {
    await rename(temporary, executable);
  } catch (error) {
    await rename(aside, executable);
    throw error;
  }
}
