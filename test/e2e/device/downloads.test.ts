/**
 * Downloads: the server offers what `npm run build:host [-- --target linux-arm64 | win-x64]` built, byte
 * for byte, with correct SHA-256s, content types and file names, and the signed manifest that names them
 * all; the linux-arm64 executable downloaded from it runs `--version` (Node 24) and a call under
 * qemu-aarch64 (Debian's qemu-user, with the arm64 C library from libc6-arm64-cross and
 * libstdc++6-arm64-cross); the win-x64 one is built (a PE executable carrying the SEA blob), not run.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync } from "node:fs";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import t from "tap";
import { buildHost, DOWNLOADS_DIR, executablePath } from "../../../scripts/build-host.js";
import { verifyManifest } from "../../../src/protocol/manifest.js";
import { HOST_VERSION } from "../../../src/device/version.js";
import { IN_CI } from "../../helpers/database.js";
import { builtExecutable } from "../../host/executable.js";
import { signedIn, startHostServer } from "../../host/helpers.js";
import { readJson } from "../../helpers/client.js";

const run = promisify(execFile);
const QEMU = "/usr/bin/qemu-aarch64";
const ARM64_SYSROOT = "/usr/aarch64-linux-gnu";

async function sha256(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

// The builds are reused while newer than their sources (the foreign ones take a while the first time).
await builtExecutable(t);
await builtExecutable(t, "linux-arm64");
await builtExecutable(t, "win-x64");
const { trustedKeys } = await buildHost({ ifStale: true, log: () => {} });
const native = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}`;

t.test("the server offers each built executable, byte-identical, with its sha256", async (t) => {
  const app = await startHostServer(t, { env: { DOWNLOADS_DIR } });
  const listing = await readJson(await fetch(`${app.url}/api/host/downloads`));
  t.equal(listing.version, HOST_VERSION);
  const platforms = listing.downloads.map((download: { platform: string }) => download.platform);
  t.ok(platforms.includes(native) && platforms.includes("linux-arm64"), `offers ${native} and linux-arm64 (got ${platforms.join(", ")})`);

  for (const platform of [native, "linux-arm64"] as const) {
    const built = executablePath(platform as "linux-arm64");
    const offered = listing.downloads.find((download: { platform: string }) => download.platform === platform);
    t.equal(offered.sha256, await sha256(built), `${platform}: the listed sha256 is the build's`);
    const response = await fetch(app.url + offered.path);
    t.equal(response.status, 200);
    t.equal(response.headers.get("content-type"), "application/octet-stream");
    t.equal(response.headers.get("content-disposition"), `attachment; filename="${offered.file}"`);
    t.equal(Number(response.headers.get("content-length")), offered.size);
    const hash = createHash("sha256");
    for await (const chunk of response.body!) hash.update(chunk);
    t.equal(hash.digest("hex"), offered.sha256, `${platform}: the bytes served are the build's`);
    const checksum = await fetch(`${app.url}${offered.path}.sha256`);
    t.equal(await checksum.text(), `${offered.sha256}  ${offered.file}\n`, "sha256sum -c input");
  }

  // The signed manifest names every build's size and digest, and verifies with the key built into them.
  const manifest = await readJson(await fetch(`${app.url}/downloads/manifest.json`));
  const verdict = verifyManifest(manifest, trustedKeys);
  t.match(verdict, { ok: true, manifest: { version: HOST_VERSION, node: /^24\./ } }, "signed by the key the executables trust");
  for (const download of listing.downloads) {
    t.same(
      manifest.signed.files[download.platform],
      { file: download.file, size: download.size, sha256: download.sha256 },
      `the manifest names ${download.file} as served`,
    );
  }

  for (const bad of ["manifest.json.sig", "..%2Fpackage.json", "tether-host-linux-mips", "x".repeat(200)]) {
    const response = await fetch(`${app.url}/downloads/${bad}`);
    t.ok([400, 404, 414].includes(response.status), `${bad.slice(0, 30)}: ${response.status}`);
    t.match(await readJson(response), { code: String, message: String });
  }

  // The page lists them with their hashes.
  const owner = await signedIn(app.url);
  const page = await (await owner.get("/devices")).text();
  for (const download of listing.downloads) t.match(page, download.sha256, `/devices shows ${download.file} and its sha256`);
});

const qemuReady = existsSync(QEMU) && existsSync(path.join(ARM64_SYSROOT, "lib", "ld-linux-aarch64.so.1"));
if (!qemuReady && !IN_CI) {
  t.comment(`skipping the arm64 run: needs ${QEMU} and ${ARM64_SYSROOT} (apt-get install -y qemu-user libc6-arm64-cross libstdc++6-arm64-cross)`);
} else {
  t.test("the downloaded linux-arm64 executable runs --version and a call under qemu-aarch64", async (t) => {
    const app = await startHostServer(t, { env: { DOWNLOADS_DIR } });
    const work = await mkdtemp(path.join(os.tmpdir(), "tether-arm64-"));
    t.teardown(() => rm(work, { recursive: true, force: true }));
    const downloaded = path.join(work, "tether-host");
    await writeFile(downloaded, Buffer.from(await (await fetch(`${app.url}/downloads/tether-host-linux-arm64`)).arrayBuffer()));
    await chmod(downloaded, 0o755);
    await writeFile(path.join(work, "hello.txt"), "from arm64\n");
    const options = { cwd: work, env: { PATH: process.env.PATH ?? "", TETHER_ROOTS: work }, timeout: 120_000 };

    const version = await run(QEMU, ["-L", ARM64_SYSROOT, downloaded, "--version"], options);
    const [versionLine, runtimeLine] = version.stdout.split("\n");
    t.equal(versionLine, HOST_VERSION);
    t.match(runtimeLine, /^node 24\.\d+\.\d+ \(linux-arm64\)$/, "it embeds Node 24 for arm64");
    const stat = await run(QEMU, ["-L", ARM64_SYSROOT, downloaded, "call", "stat", JSON.stringify({ path: "hello.txt" })], options);
    t.match(JSON.parse(stat.stdout), { type: "file", size: 11 });
    const arch = await run(QEMU, ["-L", ARM64_SYSROOT, downloaded, "call", "read_file", JSON.stringify({ path: "hello.txt" })], options);
    t.match(JSON.parse(arch.stdout), { content: "from arm64\n" });
  });
}

t.test("the win-x64 executable is built: a PE file with the SEA blob, on offer and in the manifest", async (t) => {
  const file = executablePath("win-x64");
  const bytes = await readFile(file);
  t.equal(bytes.subarray(0, 2).toString("latin1"), "MZ", "a DOS/PE header");
  const pe = bytes.readUInt32LE(0x3c);
  t.equal(bytes.subarray(pe, pe + 4).toString("latin1"), "PE\0\0", "a PE signature");
  t.equal(bytes.readUInt16LE(pe + 4), 0x8664, "for x86-64");
  t.ok(bytes.includes(Buffer.from("NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2:1")), "the SEA fuse is flipped: the blob is injected");
  const app = await startHostServer(t, { env: { DOWNLOADS_DIR } });
  const listing = await readJson(await fetch(`${app.url}/api/host/downloads`));
  t.match(
    listing.downloads.find((download: { platform: string }) => download.platform === "win-x64"),
    { file: "tether-host-win-x64.exe", sha256: await sha256(file) },
  );
  const manifest = await readJson(await fetch(`${app.url}/downloads/manifest.json`));
  t.match(manifest.signed.files["win-x64"], { file: "tether-host-win-x64.exe", size: bytes.length, sha256: await sha256(file) });
});
