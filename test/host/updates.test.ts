/**
 * Updates as the server sees them: the signed manifest it passes on, the minimum version it names, the
 * reports devices send, and what their owner sees on /devices. The device runtime runs in this process
 * with its real updater (a stand-in executable, so no build is needed; the single executable goes through
 * it in test/e2e/device/update.test.ts).
 */
import { createHash, generateKeyPairSync } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { ConfigError, loadConfig } from "../../src/config/env.js";
import { deviceRequest } from "../../src/device/http.js";
import { ExitCode, runHost } from "../../src/device/host.js";
import { updateExecutable } from "../../src/device/update.js";
import { HOST_VERSION } from "../../src/device/version.js";
import { publicKeyText, signManifest } from "../../src/protocol/manifest.js";
import { builtinTools } from "../../src/tools/index.js";
import { readJson } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";
import { pair, protocolHeaders, runDevice, signedIn, startHostServer } from "./helpers.js";

const PLATFORM = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}`;
const FILE = `tether-host-${PLATFORM}`;
const NEXT = HOST_VERSION.replace(/\d+$/, (patch) => String(Number(patch) + 1));
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

async function tempDir(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-updates-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A downloads directory offering `NEXT`: a stand-in executable and a manifest signed by a key of the test's own. */
async function downloadsOffering(t: { teardown(fn: () => unknown): void }, served?: string) {
  const dir = await tempDir(t);
  const key = generateKeyPairSync("ed25519");
  const content = `#!/bin/sh\necho ${NEXT}\n`;
  await writeFile(path.join(dir, FILE), served ?? content, { mode: 0o755 });
  const manifest = signManifest(
    { format: 1, version: NEXT, node: "24.21.0", files: { [PLATFORM]: { file: FILE, size: Buffer.byteLength(content), sha256: sha256(content) } } },
    [key.privateKey],
  );
  await writeFile(path.join(dir, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return { dir, trusted: [publicKeyText(key.publicKey)] };
}

const reportBody = { ok: true, from: "0.1.0", to: "0.2.0", trigger: "manual", at: new Date().toISOString() };
const postReport = (url: string, token: string | undefined, body: unknown) =>
  fetch(`${url}/api/host/update-report`, {
    method: "POST",
    headers: { "content-type": "application/json", ...protocolHeaders, ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });

t.test("MIN_HOST_VERSION is validated at start-up", async (t) => {
  t.equal(loadConfig({ MIN_HOST_VERSION: "1.2.0" }).minHostVersion, "1.2.0");
  t.equal(loadConfig({}).minHostVersion, undefined);
  for (const bad of ["1.2", "v1.2.0", "latest", "1.2.0-beta"]) {
    let problems: string[] = [];
    try {
      loadConfig({ MIN_HOST_VERSION: bad });
    } catch (error) {
      if (error instanceof ConfigError) problems = error.problems;
    }
    t.same(problems, [`MIN_HOST_VERSION=${bad} is not a version (like 1.2.0)`], `${bad}: one line naming it`);
  }
});

t.test("the signed manifest is served byte for byte; the version on offer is its signed one", async (t) => {
  const offered = await downloadsOffering(t);
  const app = await startHostServer(t, { env: { DOWNLOADS_DIR: offered.dir } });
  const response = await fetch(`${app.url}/downloads/manifest.json`);
  t.equal(response.status, 200);
  t.match(response.headers.get("content-type"), /^application\/json/);
  t.equal(await response.text(), await readFile(path.join(offered.dir, "manifest.json"), "utf8"));
  t.equal((await readJson(await fetch(`${app.url}/api/host/downloads`))).version, NEXT);

  const empty = await startHostServer(t, { env: { DOWNLOADS_DIR: await tempDir(t) } });
  const missing = await fetch(`${empty.url}/downloads/manifest.json`);
  t.equal(missing.status, 404);
  t.match(await readJson(missing), { code: "NOT_FOUND", message: /no signed release manifest/ });
});

t.test("update reports: kept on the device, shown to its owner; bad ones are a 4xx", async (t) => {
  const app = await startHostServer(t, { env: { DOWNLOADS_DIR: await tempDir(t) } });
  const owner = await signedIn(app.url);
  const device = await pair(owner, "reporting-box");
  t.equal((await postReport(app.url, device.token, reportBody)).status, 204);
  let listed = (await readJson(await owner.get("/api/host/devices"))).devices[0];
  t.match(listed.lastUpdate, { ok: true, from: "0.1.0", to: "0.2.0", trigger: "manual", receivedAt: String });
  t.match(await (await owner.get("/devices")).text(), /Last update: 0\.1\.0 → 0\.2\.0 \(by hand\)/);

  const failed = {
    ok: false,
    from: "0.1.0",
    to: "0.2.0",
    trigger: "auto",
    code: "UPDATE_DIGEST_MISMATCH",
    message: "The download's SHA-256 is 00; the signed manifest names 11",
    at: new Date().toISOString(),
  };
  t.equal((await postReport(app.url, device.token, failed)).status, 204);
  listed = (await readJson(await owner.get("/api/host/devices"))).devices[0];
  t.match(listed.lastUpdate, { ok: false, code: "UPDATE_DIGEST_MISMATCH" }, "the latest report replaces the one before");
  const page = await (await owner.get("/devices")).text();
  t.match(page, /Update to 0\.2\.0 failed \(automatic\)/);
  t.match(page, /UPDATE_DIGEST_MISMATCH/);
  t.match(page, /The device still runs 0\.1\.0/);

  const bad: Array<[string, unknown]> = [
    ["a field of its own", { ...reportBody, extra: 1 }],
    ["no version it ran", { ...reportBody, from: undefined }],
    ["a version that is not one", { ...reportBody, to: "soon" }],
    ["an unknown trigger", { ...reportBody, trigger: "cron" }],
    ["a code that is not a code", { ...failed, code: "bad code; drop table" }],
    ["a message far too long", { ...failed, message: "x".repeat(1001) }],
    ["not an object", ["ok"]],
  ];
  for (const [name, body] of bad) {
    const response = await postReport(app.url, device.token, body);
    t.equal(response.status, 400, `${name}: 400`);
    t.match(await readJson(response), { code: String, message: String });
  }
  const anonymous = await postReport(app.url, undefined, reportBody);
  t.equal(anonymous.status, 401);
  t.match(await readJson(anonymous), { code: "DEVICE_TOKEN_INVALID" });
  t.equal((await owner.delete(`/api/host/devices/${device.deviceId}`)).status, 204);
  const revoked = await postReport(app.url, device.token, reportBody);
  t.equal(revoked.status, 401);
  t.match(await readJson(revoked), { code: "DEVICE_REVOKED" });
});

t.test("the minimum version: told at hello, and an older device shows as outdated", async (t) => {
  const above = HOST_VERSION.replace(/^(\d+)/, (major) => String(Number(major) + 1));
  const app = await startHostServer(t, { env: { DOWNLOADS_DIR: await tempDir(t), MIN_HOST_VERSION: above } });
  const owner = await signedIn(app.url);
  const dir = await tempDir(t);
  const lines: string[] = [];
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
  const oldBox = runDevice(t, { server: app.url, root: dir, pairingCode: code, name: "old-box", log: (line) => lines.push(line) });
  await eventually(() => lines.some((line) => line.includes("connected to")), 20_000, "the device connects");
  t.ok(
    lines.some((line) => line.includes(`this server supports tether-host ${above} or later; this is ${HOST_VERSION}`)),
    "the device says it is below the server's minimum",
  );
  const page = await (await owner.get("/devices")).text();
  t.match(page, /badge-danger[^>]*>Outdated</);
  t.match(page, `Outdated: this server supports tether-host ${above} or later (this device runs tether-host/${HOST_VERSION})`);
  t.equal(await oldBox.stop(), ExitCode.stopped);

  // Without a minimum, no device is outdated.
  const plain = await startHostServer(t, { env: { DOWNLOADS_DIR: await tempDir(t) } });
  const other = await signedIn(plain.url);
  const device = await pair(other);
  const hello = await fetch(`${plain.url}/api/host/hello`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${device.token}`, ...protocolHeaders },
    body: JSON.stringify({ tools: [], roots: ["/tmp"], agent: "tether-host/0.0.1" }),
  });
  t.notOk("minimumHostVersion" in (await readJson(hello)));
  t.notMatch(await (await other.get("/devices")).text(), />Outdated</);
});

t.test(
  "update: auto, under a service: installs what the server announces, reports it, and exits 10 for a restart",
  { skip: process.platform === "win32" && "the stand-in executable is a shell script" },
  async (t) => {
    const offered = await downloadsOffering(t);
    const app = await startHostServer(t, { env: { DOWNLOADS_DIR: offered.dir } });
    const owner = await signedIn(app.url);
    const dir = await tempDir(t);
    const executable = path.join(dir, "tether-host");
    await writeFile(executable, `#!/bin/sh\necho ${HOST_VERSION}\n`, { mode: 0o755 });
    const lines: string[] = [];
    const log = (line: string) => lines.push(line);
    const install = () =>
      updateExecutable({ server: app.url, request: deviceRequest(), executable, version: HOST_VERSION, platform: PLATFORM, trustedKeys: offered.trusted, log });
    const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
    const base = { server: app.url, tools: builtinTools, roots: [dir], configDir: path.join(dir, "cfg"), name: "auto-box", handleSignals: false, log };

    // notify (the default): one line, nothing installed.
    const stop = new AbortController();
    const notifying = runHost({ ...base, pairingCode: code, signal: stop.signal, updates: { policy: "notify", install } });
    await eventually(() => lines.some((line) => line.includes("an update is available")), 20_000, "the notice");
    t.match(
      lines.find((line) => line.includes("an update is available")),
      `an update is available: ${NEXT} (this is ${HOST_VERSION}). Run \`tether-host update\``,
    );
    stop.abort();
    t.equal(await notifying, ExitCode.stopped);
    t.equal(await readFile(executable, "utf8"), `#!/bin/sh\necho ${HOST_VERSION}\n`, "notify installs nothing");

    // off: not even the notice.
    lines.length = 0;
    const quiet = new AbortController();
    const pinned = runHost({ ...base, signal: quiet.signal, updates: { policy: "off", install } });
    await eventually(() => lines.some((line) => line.includes("connected to")), 20_000, "connected");
    quiet.abort();
    t.equal(await pinned, ExitCode.stopped);
    t.notOk(
      lines.some((line) => /update is available|updating|updated/.test(line)),
      "pinned off: no notice, no update",
    );

    // auto, as a service runs it: the update, the report, then exit 10.
    lines.length = 0;
    const exited = await runHost({ ...base, updates: { policy: "auto", install, restartAfterUpdate: true } });
    t.equal(exited, ExitCode.updated, "exit 10: the service manager starts the new executable");
    t.equal(await readFile(executable, "utf8"), `#!/bin/sh\necho ${NEXT}\n`, "the new executable is in place");
    t.ok(lines.some((line) => line.includes(`is in place; exiting so the service manager starts it`)));
    const listed = (await readJson(await owner.get("/api/host/devices"))).devices[0];
    t.match(listed.lastUpdate, { ok: true, from: HOST_VERSION, to: NEXT, trigger: "auto" }, "the server heard of it before the exit");
    t.match(JSON.parse(await readFile(path.join(dir, "cfg", "last-update.json"), "utf8")), { reported: true, report: { ok: true, to: NEXT } });
  },
);

t.test(
  "a failed automatic update is reported, the old executable keeps running",
  { skip: process.platform === "win32" && "the stand-in executable is a shell script" },
  async (t) => {
    // The server serves other bytes than the signed manifest names.
    const offered = await downloadsOffering(t, `#!/bin/sh\necho ${NEXT}!\n`);
    const app = await startHostServer(t, { env: { DOWNLOADS_DIR: offered.dir } });
    const owner = await signedIn(app.url);
    const dir = await tempDir(t);
    const executable = path.join(dir, "tether-host");
    const old = `#!/bin/sh\necho ${HOST_VERSION}\n`;
    await writeFile(executable, old, { mode: 0o755 });
    const lines: string[] = [];
    const log = (line: string) => lines.push(line);
    const install = () =>
      updateExecutable({ server: app.url, request: deviceRequest(), executable, version: HOST_VERSION, platform: PLATFORM, trustedKeys: offered.trusted, log });
    const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
    const device = runDevice(t, {
      server: app.url,
      root: dir,
      pairingCode: code,
      name: "failing-box",
      log,
      updates: { policy: "auto", install, restartAfterUpdate: true },
    });
    await eventually(async () => (await readJson(await owner.get("/api/host/devices"))).devices[0]?.lastUpdate?.ok === false, 20_000, "the failure reported");
    const listed = (await readJson(await owner.get("/api/host/devices"))).devices[0];
    t.match(listed, { online: true, lastUpdate: { ok: false, from: HOST_VERSION, to: NEXT, code: "UPDATE_SIZE_MISMATCH", trigger: "auto" } });
    t.match(lines.join("\n"), new RegExp(`update failed \\(UPDATE_SIZE_MISMATCH\\).*; ${HOST_VERSION.replace(/\./g, "\\.")} stays in place`));
    t.equal(await readFile(executable, "utf8"), old);
    t.equal(await device.stop(), ExitCode.stopped, "the host went on running, and stopped when asked");
  },
);
