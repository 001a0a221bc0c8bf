/**
 * Downloads: the server offers what `npm run build:host [-- --target linux-arm64]` built, byte for
 * byte, with correct SHA-256s, content types and file names; the linux-arm64 executable downloaded
 * from it runs under qemu-aarch64 (Debian's qemu-user, with the arm64 C library from
 * libc6-arm64-cross and libstdc++6-arm64-cross).
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync } from "node:fs";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import t from "tap";
import { DOWNLOADS_DIR, executablePath } from "../../scripts/build-host.js";
import { HOST_VERSION } from "../../src/device/version.js";
import { IN_CI } from "../helpers/database.js";
import { builtExecutable } from "./executable.js";
import { signedIn, startHostServer } from "./helpers.js";
import { readJson } from "../helpers/client.js";

const run = promisify(execFile);
const QEMU = "/usr/bin/qemu-aarch64";
const ARM64_SYSROOT = "/usr/aarch64-linux-gnu";

async function sha256(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

// Both builds are reused while newer than their sources (the arm64 one takes a while the first time).
await builtExecutable(t);
await builtExecutable(t, "linux-arm64");
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

  for (const bad of ["manifest.json", "..%2Fpackage.json", "tether-host-linux-mips", "x".repeat(200)]) {
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
    t.equal(version.stdout.trim(), HOST_VERSION);
    const stat = await run(QEMU, ["-L", ARM64_SYSROOT, downloaded, "call", "stat", JSON.stringify({ path: "hello.txt" })], options);
    t.match(JSON.parse(stat.stdout), { type: "file", size: 11 });
    const arch = await run(QEMU, ["-L", ARM64_SYSROOT, downloaded, "call", "read_file", JSON.stringify({ path: "hello.txt" })], options);
    t.match(JSON.parse(arch.stdout), { content: "from arm64\n" });
  });
}
