/**
 * `npm run bench -- host` (or `node --import tsx bench/host.ts`): the device host connector.
 *
 * 1. Calls: `POST /api/host/calls` running `stat` on a connected device (the real runtime, in its own
 *    process) against a bare Fastify JSON POST route, both driven by autocannon from another process:
 *    one connection (round-trip latency, p50/p99) and ten (throughput, calls/s). The same `stat`
 *    through MCP (`tools/call` POSTed to `/mcp`, stateless Streamable HTTP, JSON responses) in the
 *    same run.
 * 2. Idle streams: how much memory the server holds per idle device stream, opened from another
 *    process, against the same number of plain idle keep-alive connections.
 * Machines here are noisy: read the ratios, not the absolute numbers.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import Fastify from "fastify";
import { openDatabase } from "../src/db/connect.js";
import { createDevice, recordHello } from "../src/plugins/host/devices.js";
import { BENCH_ORIGIN, startBenchApp } from "./bench-app.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 3000);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..");
const require = createRequire(import.meta.url);
const AUTOCANNON_BIN = path.join(path.dirname(require.resolve("autocannon/package.json")), "autocannon.js");
const run = promisify(execFile);

interface Load {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** autocannon in its own process, POSTing `body` as JSON. */
async function post(url: string, body: unknown, connections: number, seconds: number, headers: Record<string, string> = {}): Promise<Load> {
  const args = [AUTOCANNON_BIN, "--json", "-c", String(connections), "-d", String(seconds), "-m", "POST", "-b", JSON.stringify(body), "-H", "content-type=application/json"];
  for (const [name, value] of Object.entries(headers)) args.push("-H", `${name}=${value}`);
  args.push(url);
  const { stdout } = await run(process.execPath, args, { maxBuffer: 16 * 1024 * 1024 });
  const r = JSON.parse(stdout) as { requests: { average: number }; latency: { p50: number; p99: number }; non2xx: number; errors: number };
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors };
}

const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

function gc(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

async function settledRss(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return process.memoryUsage().rss;
}

/** The stream client (this file run with `--streams`): opens one connection per line of the file, then waits. */
async function streamClient(url: string, tokensFile: string, plain: boolean): Promise<void> {
  const tokens = (await readFile(tokensFile, "utf8")).split("\n").filter(Boolean);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  let open = 0;
  await Promise.all(
    tokens.map(
      (token) =>
        new Promise<void>((resolve, reject) => {
          const target = new URL(plain ? "/healthz" : "/api/host/stream", url);
          const request = http.get(target, { agent, headers: plain ? {} : { authorization: `Bearer ${token}`, "tether-protocol": "1" } }, (response) => {
            if (response.statusCode !== 200) return reject(new Error(`${response.statusCode} from ${target.pathname}`));
            open++;
            if (plain) response.resume().on("end", resolve); // a finished request leaves an idle keep-alive socket
            else {
              response.once("data", () => resolve()); // the `ready` event
              response.resume();
            }
          });
          request.on("error", reject);
        }),
    ),
  );
  process.stdout.write(`open ${open}\n`);
  // Held until the parent kills us (an idle keep-alive socket is unref'd, so keep the process alive).
  setInterval(() => {}, 1 << 30);
}

/**
 * The latency client (this file run with `--latency`): one keep-alive connection, one request at a
 * time for `seconds`, each timed in microseconds (autocannon rounds to whole milliseconds).
 */
async function latencyClient(url: string, body: string, headers: string, seconds: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const extra = JSON.parse(headers) as Record<string, string>;
  const once = () =>
    new Promise<number>((resolve, reject) => {
      const started = process.hrtime.bigint();
      const request = http.request(url, { method: "POST", agent, headers: { "content-type": "application/json", ...extra } }, (response) => {
        response.resume().on("end", () => (response.statusCode === 200 ? resolve(Number(process.hrtime.bigint() - started) / 1000) : reject(new Error(`HTTP ${response.statusCode}`))));
      });
      request.on("error", reject);
      request.end(body);
    });
  for (let i = 0; i < 200; i++) await once(); // warm-up
  const samples: number[] = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) samples.push(await once());
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
  process.stdout.write(`${JSON.stringify({ count: samples.length, perSecond: samples.length / seconds, p50: at(0.5), p99: at(0.99) })}\n`);
  agent.destroy();
}

interface Latency {
  count: number;
  perSecond: number;
  p50: number;
  p99: number;
}

async function latency(url: string, body: unknown, seconds: number, headers: Record<string, string> = {}): Promise<Latency> {
  const { stdout } = await run(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--latency", url, JSON.stringify(body), JSON.stringify(headers), String(seconds)], {
    cwd: ROOT,
  });
  return JSON.parse(stdout) as Latency;
}

function startChild(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
}

function waitForLine(child: ChildProcess, pattern: RegExp, stream: "stdout" | "stderr" = "stdout", timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffer = "";
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern}: ${buffer.slice(-500)}`)), timeoutMs);
    child[stream]!.setEncoding("utf8").on("data", (chunk: string) => {
      buffer += chunk;
      const match = buffer.split("\n").find((line) => pattern.test(line));
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
    child.on("exit", (code) => reject(new Error(`child exited (${code}) before ${pattern}: ${buffer.slice(-500)}`)));
  });
}

export async function benchHost(): Promise<void> {
  console.log("\n## Device host: tool calls through the API, and idle device streams");
  console.log(`(autocannon in its own process, ${SECONDS}s per run; the device runs in its own process)\n`);

  // Baseline: a bare Fastify JSON POST route.
  const bare = Fastify();
  bare.post("/bare", async (request) => ({ tool: "stat", class: "read", result: request.body }));
  await bare.listen({ port: 0, host: "127.0.0.1" });
  const bareUrl = `http://127.0.0.1:${(bare.server.address() as { port: number }).port}/bare`;
  const sample = { deviceId: "00000000-0000-0000-0000-000000000000", tool: "stat", input: { path: "." } };
  await post(bareUrl, sample, 10, 1);
  const bare1 = await latency(bareUrl, sample, SECONDS);
  const bare10 = await post(bareUrl, sample, 10, SECONDS);
  await bare.close();

  const work = await mkdtemp(path.join(os.tmpdir(), "tether-bench-host-"));
  const database = await openDatabase({ kind: "pglite-memory" });
  const { app, base, cookie, mintToken } = await startBenchApp(database);
  const children: ChildProcess[] = [];
  try {
    const session = { cookie, origin: BENCH_ORIGIN, "content-type": "application/json" };
    const token = await mintToken(["host:call"]);
    const { code } = (await (await fetch(`${base}/api/host/pairing-codes`, { method: "POST", headers: session, body: "{}" })).json()) as { code: string };

    // The device: the real runtime in its own process.
    const device = startChild(["src/device/main.ts"], {
      TETHER_SERVER_URL: base,
      TETHER_PAIRING_CODE: code,
      TETHER_ROOTS: work,
      TETHER_CONFIG_DIR: path.join(work, "config"),
      TETHER_CONCURRENCY: "16",
    });
    children.push(device);
    await waitForLine(device, /connected to/, "stderr");
    device.stderr!.resume();
    const credentials = JSON.parse(await readFile(path.join(work, "config", "credentials.json"), "utf8")) as { servers: Record<string, { deviceId: string }> };
    const deviceId = credentials.servers[base]!.deviceId;

    const call = { deviceId, tool: "stat", input: { path: "." } };
    const auth = { authorization: `Bearer ${token}` };
    await post(`${base}/api/host/calls`, call, 10, 1, auth);
    const calls1 = await latency(`${base}/api/host/calls`, call, SECONDS, auth);
    const calls10 = await post(`${base}/api/host/calls`, call, 10, SECONDS, auth);
    const mcpCall = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "stat", arguments: { device: deviceId, path: "." } } };
    const mcpHeaders = { ...auth, accept: "application/json, text/event-stream" };
    await post(`${base}/mcp`, mcpCall, 10, 1, mcpHeaders);
    const mcp1 = await latency(`${base}/mcp`, mcpCall, SECONDS, mcpHeaders);
    const mcp10 = await post(`${base}/mcp`, mcpCall, 10, SECONDS, mcpHeaders);

    const ms = (us: number) => `${fmt(us / 1000, 2)} ms`;
    console.log("Round trip, one request at a time on one keep-alive connection:");
    console.log(`  bare Fastify JSON POST (baseline)     p50 ${ms(bare1.p50).padStart(9)}   p99 ${ms(bare1.p99).padStart(9)}   ${fmt(bare1.perSecond).padStart(6)} /s`);
    console.log(
      `  stat via POST /api/host/calls         p50 ${ms(calls1.p50).padStart(9)}   p99 ${ms(calls1.p99).padStart(9)}   ${fmt(calls1.perSecond).padStart(6)} /s` +
        `   (p50 ${fmt(calls1.p50 / bare1.p50, 1)}×, p99 ${fmt(calls1.p99 / bare1.p99, 1)}× the baseline)`,
    );
    console.log(
      `  stat via MCP tools/call on /mcp       p50 ${ms(mcp1.p50).padStart(9)}   p99 ${ms(mcp1.p99).padStart(9)}   ${fmt(mcp1.perSecond).padStart(6)} /s` +
        `   (p50 ${fmt(mcp1.p50 / calls1.p50, 2)}× POST /api/host/calls)`,
    );
    const problems = (load: Load) => (load.non2xx + load.errors > 0 ? `  (${load.non2xx} non-2xx, ${load.errors} errors!)` : "");
    console.log("Throughput, autocannon with 10 connections:");
    console.log(`  bare Fastify JSON POST (baseline)     ${fmt(bare10.rps).padStart(7)} /s   p99 ${fmt(bare10.p99, 0)} ms`);
    console.log(`  stat via POST /api/host/calls         ${fmt(calls10.rps).padStart(7)} /s   p99 ${fmt(calls10.p99, 0)} ms   (${fmt((calls10.rps / bare10.rps) * 100, 1)}% of the baseline)${problems(calls10)}`);
    console.log(`  stat via MCP tools/call on /mcp       ${fmt(mcp10.rps).padStart(7)} /s   p99 ${fmt(mcp10.p99, 0)} ms   (${fmt((mcp10.rps / calls10.rps) * 100, 1)}% of POST /api/host/calls)${problems(mcp10)}`);
    device.kill("SIGTERM");

    // Idle streams: devices made directly in the database (pairing them one by one is not the point).
    const userId = (await database.db.selectFrom("user").select("id").executeTakeFirstOrThrow()).id;
    const tokens: string[] = [];
    for (let i = 0; i < STREAMS; i++) {
      const created = await createDevice(database.db, { userId, name: `idle-${i}`, platform: "bench" });
      await recordHello(database.db, created.deviceId, { tools: [], roots: [], agent: "bench" });
      tokens.push(created.token);
    }
    const tokensFile = path.join(work, "tokens.txt");
    await writeFile(tokensFile, tokens.join("\n"));

    const measure = async (plain: boolean): Promise<{ perConnection: number; open: number }> => {
      const before = await settledRss();
      const client = startChild([fileURLToPath(import.meta.url), "--streams", base, tokensFile, plain ? "plain" : "sse"]);
      children.push(client);
      const line = await waitForLine(client, /^open \d+/);
      const after = await settledRss();
      if (client.exitCode !== null) throw new Error(`the connection client exited early (${client.exitCode})`);
      const exited = new Promise((resolve) => client.once("exit", resolve));
      client.kill("SIGKILL");
      await exited;
      await new Promise((resolve) => setTimeout(resolve, 500));
      return { perConnection: (after - before) / STREAMS, open: Number(line.split(" ")[1]) };
    };
    const plain = await measure(true);
    const sse = await measure(false);
    const online = (await app.tetherHost.listDevices(userId)).filter((d) => d.online).length;
    console.log(
      `\n${fmt(STREAMS)} idle connections from another process (server RSS delta after GC):\n` +
        `  plain idle keep-alive sockets (baseline)   ${fmt(plain.perConnection / 1024, 1).padStart(6)} KB each (${fmt(plain.open)} open)\n` +
        `  idle device streams (SSE, keep-alives)     ${fmt(sse.perConnection / 1024, 1).padStart(6)} KB each (${fmt(sse.open)} open)  ${fmt(sse.perConnection / Math.max(1, plain.perConnection), 1)}× the baseline\n` +
        `  devices online after the client left: ${online} (every stream was detached)`,
    );
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    await app.close();
    await database.close();
    await rm(work, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--latency") {
  await latencyClient(process.argv[3]!, process.argv[4]!, process.argv[5]!, Number(process.argv[6]));
} else if (process.argv[2] === "--streams") {
  await streamClient(process.argv[3]!, process.argv[4]!, process.argv[5] === "plain");
} else if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await benchHost();
  process.exit(0);
}
