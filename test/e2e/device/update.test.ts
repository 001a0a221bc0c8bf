/**
 * `tether-host update`, the real single executable against a release server of the test's own: a genuine
 * next release (the same sources built as the next version, see test/host/release.ts) replaces the
 * executable and the next start runs it; a wrong signature, a wrong digest, a truncated download, an older
 * version and a different key are each refused with the old executable untouched; an update killed midway
 * leaves the old one working.
 */
import { spawn } from "node:child_process";
import { createHash, generateKeyPairSync } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { executableName, NATIVE_TARGET } from "../../../scripts/build-host.js";
import { loadSigningKeys } from "../../../scripts/signing-keys.js";
import { HOST_VERSION } from "../../../src/device/version.js";
import { signManifest, type SignedManifest } from "../../../src/protocol/manifest.js";
import { eventually } from "../../helpers/eventually.js";
import { startReleaseServer } from "../../helpers/release-server.js";
import { installedCopy, releases, versionOf } from "../../host/release.js";

const FILE = executableName(NATIVE_TARGET);
const { current, next } = await releases(t);
const genuine = JSON.parse(await readFile(next.manifest, "utf8")) as SignedManifest;
const keys = await loadSigningKeys();
const server = await startReleaseServer(t);

async function sha256(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}
const currentDigest = await sha256(current);

/** `tether-host update` run by the installed copy, against the release server (its config elsewhere). */
async function update(t: Test, executable: string, extra: Record<string, string> = {}) {
  const configDir = await mkdtemp(path.join(os.tmpdir(), "tether-update-cfg-"));
  t.teardown(() => rm(configDir, { recursive: true, force: true }));
  const child = spawn(executable, ["update", ...(extra.ARGS ? [extra.ARGS] : [])], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: path.dirname(executable), TETHER_SERVER_URL: server.url, TETHER_CONFIG_DIR: configDir, ...extra },
    stdio: ["ignore", "pipe", "pipe"],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  child.stdout.resume();
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, exited, stderr: () => stderr, configDir };
}

function offer(manifest: unknown, executable: Parameters<typeof server.offer>[1] = { file: next.executable }) {
  server.offer("manifest.json", { bytes: JSON.stringify(manifest) });
  server.offer(FILE, executable);
}

/** The old executable exactly as it was, still running, with nothing left beside it. */
async function untouched(t: Test, installed: Awaited<ReturnType<typeof installedCopy>>) {
  t.equal(await sha256(installed.path), currentDigest, "the old executable is byte for byte the same");
  t.equal((await versionOf(installed.path)).version, HOST_VERSION, "and still runs");
  t.same(await installed.others(), [], "no temporary file is left");
}

t.test("a genuine next release replaces the executable; the next start runs it, on Node 24", async (t) => {
  const installed = await installedCopy(t, current);
  t.match((await versionOf(installed.path)).runtime, /^node 24\.\d+\.\d+ /, "the executable embeds Node 24");
  offer(genuine);
  const run = await update(t, installed.path);
  t.equal(await run.exited, 0, run.stderr());
  t.match(run.stderr(), new RegExp(`updated ${HOST_VERSION.replace(/\./g, "\\.")} → ${next.version.replace(/\./g, "\\.")}`));
  t.equal(await sha256(installed.path), await sha256(next.executable), "the file in place is the release, byte for byte");
  t.equal((await stat(installed.path)).mode & 0o111, 0o111, "and executable");
  const after = await versionOf(installed.path);
  t.equal(after.version, next.version, "the next start runs the new version");
  t.match(after.runtime, /^node 24\./);
  t.same(await installed.others(), [], "nothing left beside it");
  t.match(
    JSON.parse(await readFile(path.join(run.configDir, "last-update.json"), "utf8")),
    { reported: false, report: { ok: true, to: next.version, trigger: "manual" } },
    "kept to report once enrolled",
  );
  const again = await update(t, installed.path);
  t.equal(await again.exited, 0);
  t.match(again.stderr(), `${next.version} is the version the server offers; nothing to do`);
});

t.test("refused, the old executable untouched: a wrong signature", async (t) => {
  const installed = await installedCopy(t, current);
  const forged = JSON.parse(JSON.stringify(genuine)) as SignedManifest;
  const signature = Buffer.from(forged.signatures[0]!.signature, "base64");
  signature[5]! ^= 0x01;
  forged.signatures[0]!.signature = signature.toString("base64");
  offer(forged);
  const run = await update(t, installed.path);
  t.equal(await run.exited, 1);
  t.match(run.stderr(), /update failed \(MANIFEST_SIGNATURE_INVALID\)/);
  await untouched(t, installed);
});

t.test("refused, the old executable untouched: a download whose digest is not the signed one", async (t) => {
  const installed = await installedCopy(t, current);
  offer(genuine, { file: next.executable, flipByteAt: 1_000_000 });
  const run = await update(t, installed.path);
  t.equal(await run.exited, 1);
  t.match(run.stderr(), /update failed \(UPDATE_DIGEST_MISMATCH\): The download's SHA-256 is [0-9a-f]{64}; the signed manifest names [0-9a-f]{64}/);
  await untouched(t, installed);
});

t.test("refused, the old executable untouched: a truncated download", async (t) => {
  const installed = await installedCopy(t, current);
  offer(genuine, { file: next.executable, truncateTo: 40_000_000 });
  const run = await update(t, installed.path);
  t.equal(await run.exited, 1);
  t.match(run.stderr(), /update failed \(UPDATE_SIZE_MISMATCH\): Downloaded 40000000 bytes; the manifest names \d+ \(a truncated download\)/);
  await untouched(t, installed);
});

t.test("refused, the old executable untouched: an older version, even signed with the right key", async (t) => {
  const installed = await installedCopy(t, current);
  offer(signManifest({ ...genuine.signed, version: "0.0.1" }, keys.privateKeys));
  const run = await update(t, installed.path);
  t.equal(await run.exited, 1);
  t.match(run.stderr(), /update failed \(UPDATE_DOWNGRADE\): The server offers 0\.0\.1, which is not newer than this/);
  t.notOk(server.requests.slice(-1)[0]?.endsWith(FILE), "nothing downloaded");
  await untouched(t, installed);
});

t.test("refused, the old executable untouched: a release signed by a different key", async (t) => {
  const installed = await installedCopy(t, current);
  offer(signManifest(genuine.signed, [generateKeyPairSync("ed25519").privateKey]));
  const run = await update(t, installed.path);
  t.equal(await run.exited, 1);
  t.match(run.stderr(), /update failed \(MANIFEST_UNTRUSTED_KEY\): The release manifest is not signed by a key this tether-host trusts/);
  await untouched(t, installed);
});

t.test("pinned off: refused unless forced", async (t) => {
  const installed = await installedCopy(t, current);
  offer(genuine);
  const run = await update(t, installed.path, { TETHER_UPDATE: "off" });
  t.equal(await run.exited, 1);
  t.match(run.stderr(), /updates are pinned off \("update": "off", from TETHER_UPDATE\); `tether-host update --force` updates anyway/);
  await untouched(t, installed);
});

t.test("an update killed midway leaves the old executable working; the next one completes", async (t) => {
  const installed = await installedCopy(t, current);
  offer(genuine, { file: next.executable, stallAfter: 30_000_000 });
  const stalledBefore = server.stalled();
  const run = await update(t, installed.path);
  await stalledBefore;
  await eventually(async () => (await installed.others()).some((name) => name.endsWith(".update")), 20_000, "the partial download on disk");
  run.child.kill("SIGKILL");
  await run.exited;
  server.cut();
  t.equal(await sha256(installed.path), currentDigest, "the old executable is untouched");
  t.equal((await versionOf(installed.path)).version, HOST_VERSION, "and runs");
  offer(genuine);
  const finished = await update(t, installed.path);
  t.equal(await finished.exited, 0, finished.stderr());
  t.equal((await versionOf(installed.path)).version, next.version);
  t.same(await installed.others(), [], "the killed update's partial download is gone");
});
