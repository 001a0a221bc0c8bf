/**
 * `npm run bench -- blobs`: a large file fetched from a device through a blob handle, over loopback, against
 * nginx serving the same file from disk in the same run. The server (`src/server.ts`, embedded PGlite and the
 * embedded blob store) and the device (`bin/host.ts`) each run in their own process; their resident memory is
 * read from /proc before and at its peak (VmHWM) so the growth a transfer causes is printed too.
 * `BENCH_BLOB_MB` sets the size (default 1024, the issue's 1 GiB). nginx is /usr/sbin/nginx (Debian's
 * nginx-light), started on a free port with its own prefix and configuration, stopped by its PID.
 * The device is the real executable (`npm run build:host`, rebuilt only when stale), as users run it; the
 * processes' CPU seconds per transfer are printed too (on a shared machine they vary less than throughput).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, mkdir, mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildHost } from "../scripts/build-host.js";
import { freePort } from "../test/helpers/replica-process.js";
import { fmt } from "./autocannon.js";
import { startRelay, startSender } from "./node-relay.js";

const MB = Number(process.env.BENCH_BLOB_MB ?? 1024);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const NGINX = "/usr/sbin/nginx";
/** Node flags for the server process, to profile it (`BENCH_BLOB_SERVER_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof"`, `--trace-gc`). */
const SERVER_FLAGS = (process.env.BENCH_BLOB_SERVER_FLAGS ?? "").split(" ").filter(Boolean);

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Resident and peak resident memory of a process, in MB. */
async function memoryMb(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0);
  return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

/** CPU seconds (user + system, every thread) a process has used so far. */
async function cpuSeconds(pid: number, stat = `/proc/${pid}/stat`): Promise<number> {
  const fields = (await readFile(stat, "utf8")).split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds of a process's main thread (its JavaScript, and the system calls it makes itself). */
async function mainThreadCpuSeconds(pid: number): Promise<number> {
  return cpuSeconds(pid, `/proc/${pid}/task/${pid}/stat`);
}

/** Resets a process's peak (VmHWM) to its current RSS, so the next peak is the transfer's. */
async function resetPeak(pid: number): Promise<void> {
  await writeFile(`/proc/${pid}/clear_refs`, "5").catch(() => {});
}

/** GETs `url`, discarding the bytes as they come; seconds and bytes. */
async function download(url: string): Promise<{ seconds: number; bytes: number; status: number }> {
  const started = performance.now();
  const response = await fetch(url);
  let bytes = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.length;
  return { seconds: (performance.now() - started) / 1000, bytes, status: response.status };
}

async function writeTestFile(file: string, megabytes: number): Promise<void> {
  const block = randomBytes(1024 * 1024);
  const handle = await open(file, "w");
  try {
    for (let i = 0; i < megabytes; i++) await handle.write(block);
  } finally {
    await handle.close();
  }
}

function stopProcess(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

async function startNginx(dir: string, root: string): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const conf = path.join(dir, "nginx.conf");
  await writeFile(
    conf,
    `daemon off;\nworker_processes 1;\npid ${dir}/nginx.pid;\nerror_log ${dir}/nginx-error.log;\nevents { worker_connections 64; }\n` +
      `http {\n  access_log off;\n  client_body_temp_path ${dir}/body;\n  proxy_temp_path ${dir}/proxy;\n  fastcgi_temp_path ${dir}/fastcgi;\n  uwsgi_temp_path ${dir}/uwsgi;\n  scgi_temp_path ${dir}/scgi;\n` +
      `  sendfile on;\n  server { listen 127.0.0.1:${port}; root ${root}; }\n}\n`,
  );
  const child = spawn(NGINX, ["-p", dir, "-c", conf], { stdio: ["ignore", "ignore", "pipe"] });
  child.stderr.resume();
  const url = `http://127.0.0.1:${port}`;
  await waitFor("nginx", async () => (await fetch(`${url}/`)).status > 0);
  return { child, url };
}

export async function benchBlobs(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), "tether-bench-blobs-"));
  const root = path.join(work, "root");
  const children: ChildProcess[] = [];
  try {
    // nginx's worker (nobody, when started as root) must reach the file.
    await chmod(work, 0o755);
    await mkdir(root, { mode: 0o755 });
    const file = path.join(root, "big.bin");
    // What writing a new file costs this machine now (its page cache filled), the store's part of every upload.
    const writeCpuStart = process.cpuUsage();
    await writeTestFile(file, MB);
    const writeCpu = process.cpuUsage(writeCpuStart);
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const server = spawn(process.execPath, [...SERVER_FLAGS, "--import", "tsx", "src/server.ts"], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        PORT: String(port),
        HOST: "127.0.0.1",
        DATA_DIR: path.join(work, "data"),
        BETTER_AUTH_SECRET: "bench-secret-0123456789abcdef0123456789abcdef",
        BETTER_AUTH_URL: url,
        HOST_BUILD_ON_START: "false",
        LOG_LEVEL: "warn",
        // The device's upload of the whole file is one request: give it room.
        REQUEST_TIMEOUT_MS: "600000",
        BLOB_QUOTA_MB: String(MB * 3),
      },
      stdio: ["ignore", SERVER_FLAGS.length > 0 ? "inherit" : "ignore", "pipe"],
    });
    children.push(server);
    server.stderr.resume();
    await waitFor("the server", async () => (await fetch(`${url}/healthz`)).status === 200);
    const signUp = await fetch(`${url}/api/auth/sign-up/email`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "Bench", email: `bench-blobs-${process.pid}@example.com`, password: "bench password" }),
    });
    const cookie = signUp.headers
      .getSetCookie()
      .map((c) => c.split(";")[0])
      .join("; ");
    const owner = (method: string, route: string, json?: unknown) =>
      fetch(`${url}${route}`, {
        method,
        headers: { cookie, origin: url, ...(json ? { "content-type": "application/json" } : {}) },
        ...(json ? { body: JSON.stringify(json) } : {}),
      });
    const { code } = (await (await owner("POST", "/api/host/pairing-codes")).json()) as { code: string };
    const { executable } = await buildHost({ ifStale: true, log: () => {} });
    const device = spawn(executable, [], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        TETHER_SERVER_URL: url,
        TETHER_PAIRING_CODE: code,
        TETHER_ROOTS: root,
        TETHER_CONFIG_DIR: path.join(work, "config"),
        TETHER_DEVICE_NAME: "bench",
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(device);
    let deviceLog = "";
    device.stderr.on("data", (chunk: Buffer) => (deviceLog += chunk.toString()));
    await waitFor("the device to connect", async () => /connected to/.test(deviceLog));
    const { devices } = (await (await owner("GET", "/api/host/devices")).json()) as { devices: { id: string }[] };

    const makeHandle = async () => {
      const read = (await (
        await owner("POST", "/api/host/calls", { deviceId: devices[0]!.id, tool: "read_file", input: { path: "big.bin" }, timeoutMs: 600_000 })
      ).json()) as { result: { blob?: { url: string; size: number } } };
      if (!read.result.blob) throw new Error(`no blob handle in ${JSON.stringify(read).slice(0, 300)}`);
      return read.result.blob;
    };
    // The device's upload alone (device → server's store, nothing streamed on): a one-byte range of a fresh
    // handle, which waits for the whole upload before it is served.
    const uploadOnly = await makeHandle();
    const cpuOf = async () => ({
      server: await cpuSeconds(server.pid!),
      serverMain: await mainThreadCpuSeconds(server.pid!),
      device: await cpuSeconds(device.pid!),
      client: process.cpuUsage(),
    });
    const cpuSince = async (start: Awaited<ReturnType<typeof cpuOf>>) => {
      const client = process.cpuUsage(start.client);
      return {
        server: (await cpuSeconds(server.pid!)) - start.server,
        serverMain: (await mainThreadCpuSeconds(server.pid!)) - start.serverMain,
        device: (await cpuSeconds(device.pid!)) - start.device,
        client: (client.user + client.system) / 1e6,
      };
    };
    const beforeUpload = { server: await memoryMb(server.pid!), device: await memoryMb(device.pid!) };
    await resetPeak(server.pid!);
    await resetPeak(device.pid!);
    const uploadCpuStart = await cpuOf();
    const uploadStarted = performance.now();
    const oneByte = await fetch(uploadOnly.url, { headers: { range: "bytes=0-0" } });
    await oneByte.arrayBuffer();
    if (oneByte.status !== 206) throw new Error(`the range request answered ${oneByte.status}`);
    const upload = { seconds: (performance.now() - uploadStarted) / 1000, bytes: MB * 1024 * 1024 };
    const uploadCpu = await cpuSince(uploadCpuStart);
    const afterUpload = { server: await memoryMb(server.pid!), device: await memoryMb(device.pid!) };

    const hashStarted = performance.now();
    const read = { result: { blob: await makeHandle() } };
    const handleSeconds = (performance.now() - hashStarted) / 1000;

    const before = { server: await memoryMb(server.pid!), device: await memoryMb(device.pid!) };
    await resetPeak(server.pid!);
    await resetPeak(device.pid!);
    const firstCpuStart = await cpuOf();
    const first = await download(read.result.blob.url);
    const firstCpu = await cpuSince(firstCpuStart);
    const after = { server: await memoryMb(server.pid!), device: await memoryMb(device.pid!) };
    const second = await download(read.result.blob.url);

    const nginx = await startNginx(work, root);
    children.push(nginx.child);
    // Best of three: the first may be slowed by a cold start, and the machine is shared.
    const runs = [await download(`${nginx.url}/big.bin`), await download(`${nginx.url}/big.bin`), await download(`${nginx.url}/big.bin`)];
    const baseline = runs.reduce((best, r) => (r.seconds < best.seconds ? r : best));
    // The ceiling of any Node server here (node-relay.ts): a bare relay of one upload into one download.
    const relayPort = await freePort();
    const relay = await startRelay(relayPort, MB * 1024 * 1024);
    children.push(relay);
    const relayed = download(`http://127.0.0.1:${relayPort}/`);
    children.push(startSender(relayPort, MB * 1024 * 1024));
    const bare = await relayed;
    const nginxCpuStart = process.cpuUsage();
    await download(`${nginx.url}/big.bin`);
    const nginxClientCpu = process.cpuUsage(nginxCpuStart);
    if (baseline.status !== 200) throw new Error(`nginx answered ${baseline.status}`);
    if (first.bytes !== MB * 1024 * 1024 || second.bytes !== first.bytes || baseline.bytes !== first.bytes || bare.bytes !== first.bytes)
      throw new Error(`short transfer: ${first.bytes}, ${second.bytes}, ${baseline.bytes}, ${bare.bytes}`);

    const rate = (r: { seconds: number; bytes: number }) => r.bytes / 1024 / 1024 / r.seconds;
    console.log(
      `\nblobs: a ${fmt(MB)} MB file from a device through a handle, over loopback (load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")})`,
    );
    console.log(`  handle made (read_file: hash on the device)   ${fmt(handleSeconds)} s`);
    console.log(`  device upload alone (into the store)          ${fmt(rate(upload))} MB/s  (${fmt((rate(upload) / rate(baseline)) * 100)}% of nginx)`);
    console.log(`  first fetch (streamed as the device uploads)  ${fmt(rate(first))} MB/s  (${fmt((rate(first) / rate(baseline)) * 100)}% of nginx)`);
    console.log(`  second fetch (from the embedded store)        ${fmt(rate(second))} MB/s  (${fmt((rate(second) / rate(baseline)) * 100)}% of nginx)`);
    console.log(`  nginx, the same file from disk (baseline)     ${fmt(rate(baseline))} MB/s`);
    console.log(
      `  a bare Node relay, upload piped to download   ${fmt(rate(bare))} MB/s  (${fmt((rate(bare) / rate(baseline)) * 100)}% of nginx: the ceiling of any Node server here)`,
    );
    const perGiB = (seconds: number) => fmt((seconds * 1024) / MB, 2);
    const cpuLine = (c: { server: number; serverMain: number; device: number; client: number }) =>
      `server ${perGiB(c.server)} (main thread ${perGiB(c.serverMain)}), device ${perGiB(c.device)}, client ${perGiB(c.client)}`;
    console.log(`  CPU s per GiB, upload alone: ${cpuLine(uploadCpu)}`);
    console.log(`  CPU s per GiB, first fetch:  ${cpuLine(firstCpu)}`);
    console.log(`  CPU s per GiB, writing the test file (a new file, as the store writes one): ${perGiB((writeCpu.user + writeCpu.system) / 1e6)}`);
    console.log(`  CPU s per GiB, nginx: client ${perGiB((nginxClientCpu.user + nginxClientCpu.system) / 1e6)} (nginx itself sends with sendfile)`);
    const growth = (was: { rss: number }, now: { peak: number }) => `${fmt(was.rss)} MB before, peak ${fmt(now.peak)} MB (+${fmt(now.peak - was.rss)} MB)`;
    console.log(`  server RSS, upload alone: ${growth(beforeUpload.server, afterUpload.server)}; first fetch: ${growth(before.server, after.server)}`);
    console.log(`  device RSS, upload alone: ${growth(beforeUpload.device, afterUpload.device)}; first fetch: ${growth(before.device, after.device)}`);
  } finally {
    for (const child of children.reverse()) await stopProcess(child);
    await rm(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await benchBlobs();
