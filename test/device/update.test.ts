/**
 * The updater (src/device/update.ts) against a release server of the test's own, replacing a small
 * executable (a shell script answering `--version`, so each case takes milliseconds; the real single
 * executable goes through the same cases in test/e2e/device/update.test.ts). Whatever goes wrong, the old
 * file is left exactly as it was and no temporary file stays behind.
 */
import { createHash, generateKeyPairSync, type KeyObject } from "node:crypto";
import { chmod, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { deviceRequest } from "../../src/device/http.js";
import { updateExecutable, type UpdateOutcome } from "../../src/device/update.js";
import { publicKeyText, signManifest, type ManifestBody } from "../../src/protocol/manifest.js";
import { startReleaseServer, type ReleaseServer } from "../helpers/release-server.js";

if (process.platform === "win32") {
  t.comment("the stand-in executables are shell scripts");
  process.exit(0);
}

const PLATFORM = "linux-x64";
const FILE = "tether-host-linux-x64";
const script = (version: string, extra = "") => `#!/bin/sh\n${extra}echo ${version}\necho "node (a stand-in)"\n`;
const sha256 = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");

interface Setup {
  dir: string;
  executable: string;
  old: string;
  server: ReleaseServer;
  key: KeyObject;
  trusted: string[];
  lines: string[];
  update(trusted?: string[]): Promise<UpdateOutcome>;
  /** Offers `content` as version `version`, with a manifest signed by `signer` (default: the trusted key). */
  release(version: string, content: string, options?: { signer?: KeyObject; describe?: string; platform?: string }): void;
  untouched(t: Test): Promise<void>;
}

async function setup(t: Test): Promise<Setup> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-update-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const executable = path.join(dir, "tether-host");
  const old = script("0.1.0");
  await writeFile(executable, old, { mode: 0o755 });
  const server = await startReleaseServer(t);
  const { privateKey: key, publicKey } = generateKeyPairSync("ed25519");
  const trusted = [publicKeyText(publicKey)];
  const lines: string[] = [];
  return {
    dir,
    executable,
    old,
    server,
    key,
    trusted,
    lines,
    update: (keys = trusted) =>
      updateExecutable({
        server: server.url,
        request: deviceRequest(),
        executable,
        version: "0.1.0",
        platform: PLATFORM,
        trustedKeys: keys,
        log: (line) => lines.push(line),
      }),
    release(version, content, options = {}) {
      const body: ManifestBody = {
        format: 1,
        version,
        node: "24.21.0",
        files: {
          [options.platform ?? PLATFORM]: { file: FILE, size: Buffer.byteLength(options.describe ?? content), sha256: sha256(options.describe ?? content) },
        },
      };
      server.offer("manifest.json", { bytes: JSON.stringify(signManifest(body, [options.signer ?? key])) });
      server.offer(FILE, { bytes: content });
    },
    async untouched(t) {
      t.equal(await readFile(executable, "utf8"), old, "the old executable is exactly as it was");
      t.equal((await stat(executable)).mode & 0o777, 0o755, "and still executable");
      t.same(
        (await readdir(dir)).filter((name) => name !== "tether-host"),
        [],
        "no temporary file is left behind",
      );
    },
  };
}

t.test("a newer signed release replaces the executable; the next start runs it", async (t) => {
  const s = await setup(t);
  const next = script("0.2.0");
  s.release("0.2.0", next);
  t.match(await s.update(), { status: "updated", from: "0.1.0", to: "0.2.0" });
  t.equal(await readFile(s.executable, "utf8"), next);
  t.equal((await stat(s.executable)).mode & 0o777, 0o755, "executable, with the old file's mode");
  t.same(await readdir(s.dir), ["tether-host"], "nothing else left in the directory");
  t.match(s.lines.join("\n"), /updating 0\.1\.0 → 0\.2\.0: downloading tether-host-linux-x64 .* signed by key [0-9a-f]{16}/);
});

t.test("refused, the old executable untouched: a wrong signature", async (t) => {
  const s = await setup(t);
  const next = script("0.2.0");
  s.release("0.2.0", next);
  const body: ManifestBody = {
    format: 1,
    version: "0.2.0",
    node: "24.21.0",
    files: { [PLATFORM]: { file: FILE, size: Buffer.byteLength(next), sha256: sha256(next) } },
  };
  const signed = signManifest(body, [s.key]);
  const signature = Buffer.from(signed.signatures[0]!.signature, "base64");
  signature[0]! ^= 0x80;
  signed.signatures[0]!.signature = signature.toString("base64");
  s.server.offer("manifest.json", { bytes: JSON.stringify(signed) });
  t.match(await s.update(), { status: "failed", code: "MANIFEST_SIGNATURE_INVALID", to: undefined });
  t.notOk(s.server.requests.includes(`/downloads/${FILE}`), "nothing is downloaded on a bad signature");
  await s.untouched(t);
});

t.test("refused, the old executable untouched: a download whose digest is not the signed one", async (t) => {
  const s = await setup(t);
  // Same size, one character different: what a tampering mirror would serve.
  s.release("0.2.0", script("0.2.1"), { describe: script("0.2.0") });
  t.match(await s.update(), { status: "failed", code: "UPDATE_DIGEST_MISMATCH", to: "0.2.0" });
  await s.untouched(t);
});

t.test("refused, the old executable untouched: a truncated download, a longer one, a broken connection", async (t) => {
  const s = await setup(t);
  const next = script("0.2.0");
  s.release("0.2.0", next);
  s.server.offer(FILE, { bytes: next.slice(0, 10) });
  t.match(await s.update(), {
    status: "failed",
    code: "UPDATE_SIZE_MISMATCH",
    message: /Downloaded 10 bytes; the manifest names \d+ \(a truncated download\)/,
  });
  await s.untouched(t);
  s.server.offer(FILE, { bytes: next + "x".repeat(100_000) });
  t.match(await s.update(), { status: "failed", code: "UPDATE_SIZE_MISMATCH", message: /larger than/ });
  await s.untouched(t);
  // The whole size announced, part of it sent, then the connection cut.
  const big = `${s.dir}-big`;
  await writeFile(big, Buffer.alloc(2_000_000, 7));
  t.teardown(() => rm(big, { force: true }));
  s.release("0.2.0", "", { describe: (await readFile(big)).toString("latin1") });
  s.server.offer(FILE, { file: big, stallAfter: 500_000 });
  const pending = s.update();
  await s.server.stalled();
  s.server.cut();
  t.match(await pending, { status: "failed", code: "UPDATE_DOWNLOAD_FAILED", message: /The download broke off after \d+ bytes/ });
  await s.untouched(t);
});

t.test("refused, the old executable untouched: an older version, a different key, no keys at all", async (t) => {
  const s = await setup(t);
  s.release("0.0.9", script("0.0.9"));
  t.match(await s.update(), { status: "failed", code: "UPDATE_DOWNGRADE", message: /0\.0\.9, which is not newer than this 0\.1\.0: a downgrade is refused/ });
  await s.untouched(t);
  s.release("0.1.0", script("0.1.0"));
  t.match(await s.update(), { status: "current", version: "0.1.0" }, "the same version: nothing to do");
  await s.untouched(t);
  s.release("0.2.0", script("0.2.0"), { signer: generateKeyPairSync("ed25519").privateKey });
  t.match(await s.update(), { status: "failed", code: "MANIFEST_UNTRUSTED_KEY" });
  await s.untouched(t);
  s.release("0.2.0", script("0.2.0"));
  t.match(await s.update([]), { status: "failed", code: "UPDATE_UNAVAILABLE", message: /no release keys built in/ });
  await s.untouched(t);
});

t.test("refused, the old executable untouched: a release that does not run here", async (t) => {
  const s = await setup(t);
  s.release("0.2.0", script("0.2.0", "exit 127\n"));
  t.match(await s.update(), { status: "failed", code: "UPDATE_TRIAL_RUN_FAILED", message: /The downloaded 0\.2\.0 does not run here/ });
  await s.untouched(t);
  s.release("0.2.0", script("0.1.5"));
  t.match(await s.update(), { status: "failed", code: "UPDATE_TRIAL_RUN_FAILED", message: /it says "0\.1\.5"/ }, "one that claims another version");
  await s.untouched(t);
});

t.test("nothing on offer, or no build for this platform: a clear failure", async (t) => {
  const s = await setup(t);
  t.match(await s.update(), { status: "failed", code: "UPDATE_MANIFEST_UNAVAILABLE", message: /answered 404: the server offers no signed release/ });
  s.release("0.2.0", script("0.2.0"), { platform: "linux-arm64" });
  t.match(await s.update(), { status: "failed", code: "UPDATE_NOT_BUILT", message: /no executable for linux-x64/ });
  s.server.offer("manifest.json", { bytes: "not json" });
  t.match(await s.update(), { status: "failed", code: "MANIFEST_INVALID" });
  s.server.offer("manifest.json", { bytes: "x".repeat(70_000) });
  t.match(await s.update(), { status: "failed", code: "MANIFEST_INVALID", message: /larger than/ });
  await s.untouched(t);
  const unreachable = await updateExecutable({
    server: "http://127.0.0.1:9",
    request: deviceRequest(),
    executable: s.executable,
    version: "0.1.0",
    platform: PLATFORM,
    trustedKeys: s.trusted,
    log: () => {},
  });
  t.match(unreachable, { status: "failed", code: "UPDATE_MANIFEST_UNAVAILABLE", message: /Cannot fetch http:\/\/127\.0\.0\.1:9\/downloads\/manifest\.json/ });
  await s.untouched(t);
});

t.test("the download of an update that was killed midway is removed by the next one", async (t) => {
  const s = await setup(t);
  const leftover = path.join(s.dir, ".tether-host.999999999.update");
  await writeFile(leftover, "half a download");
  await chmod(leftover, 0o755);
  s.release("0.2.0", script("0.2.0"));
  t.match(await s.update(), { status: "updated" });
  t.same(await readdir(s.dir), ["tether-host"]);
});
