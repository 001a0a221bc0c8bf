/**
 * `npm run bench -- host` (or `node --import tsx bench/host.ts`): the device host connector.
 *
 * 1. Calls: `POST /api/host/calls` running `stat` on a connected device (the real runtime, in its own
 *    process), on one replica and across two replicas on Redis (stream on the replica that did not
 *    get the call), against a bare Fastify JSON POST route and against the MCP filesystem server's
 *    `get_file_info` over stdio (MCP SDK client): one call at a time (latency, p50/p99) and ten at
 *    once (throughput, calls/s; autocannon in its own process for the HTTP ones). The same `stat`
 *    through Tether's own MCP endpoint (`tools/call` POSTed to `/mcp`) in the same run.
 *    With a PostgreSQL server (BENCH_DATABASE_URL, else TEST_DATABASE_URL, else the local one), also
 *    two replicas as production runs them: two `src/server.ts` processes on PostgreSQL and Redis
 *    (bench/replicas.ts), the calls to the one without the stream, and to the one with it.
 * 2. Idle streams: how much memory the server holds per idle device stream, opened from another
 *    process, against the same number of plain idle keep-alive connections.
 * Machines here are noisy: read the ratios, not the absolute numbers.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import Fastify from "fastify";
import { openDatabase, type DatabaseHandle } from "../src/db/connect.js";
import { createDevice, recordHello } from "../src/plugins/host/devices.js";
import { BENCH_ORIGIN, startBenchApp } from "./bench-app.js";
import { fmt, load, percentiles } from "./autocannon.js";
import { benchMcpFilesystem } from "./mcp-baseline.js";
import { postgresReachable, startReplicaCluster } from "./replicas.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 3000);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..");
const run = promisify(execFile);

/** autocannon in its own process, POSTing `body` as JSON. */
async function post(url: string, body: unknown, connections: number, seconds: number, headers: Record<string, string> = {}) {
  const r = await load(url, { json: body, connections, seconds, headers });
  return { rps: r.requestsPerSecond, p50: r.p50Ms, p99: r.p99Ms, non2xx: r.non2xx, errors: r.errors };
}

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
            if (plain)
              response.resume().on("end", resolve); // a finished request leaves an idle keep-alive socket
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
        response
          .resume()
          .on("end", () =>
            response.statusCode === 200 ? resolve(Number(process.hrtime.bigint() - started) / 1000) : reject(new Error(`HTTP ${response.statusCode}`)),
          );
      });
      request.on("error", reject);
      request.end(body);
    });
  for (let i = 0; i < 200; i++) await once(); // warm-up
  const samples: number[] = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) samples.push(await once());
  process.stdout.write(`${JSON.stringify({ count: samples.length, ...percentiles(samples, seconds) })}\n`);
  agent.destroy();
}

interface Latency {
  count: number;
  perSecond: number;
  p50: number;
  p99: number;
}

async function latency(url: string, body: unknown, seconds: number, headers: Record<string, string> = {}): Promise<Latency> {
  const { stdout } = await run(
    process.execPath,
    ["--import", "tsx", fileURLToPath(import.meta.url), "--latency", url, JSON.stringify(body), JSON.stringify(headers), String(seconds)],
    {
      cwd: ROOT,
    },
  );
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

/**
 * Two app instances on one database and one Redis (as two replicas are): the device's stream on B,
 * the calls through A, so every call crosses Redis both ways.
 */
async function benchTwoReplicas(database: DatabaseHandle, work: string, seconds: number, children: ChildProcess[]) {
  const redisUrl = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";
  const a = await startBenchApp(database, { redisUrl });
  const b = await startBenchApp(database, { redisUrl });
  try {
    const token = await a.mintToken(["host:call"]);
    const { code } = (await (
      await fetch(`${a.base}/api/host/pairing-codes`, {
        method: "POST",
        headers: { cookie: a.cookie, origin: BENCH_ORIGIN, "content-type": "application/json" },
        body: "{}",
      })
    ).json()) as { code: string };
    const configDir = path.join(work, "config-cluster");
    const device = startChild(["src/device/main.ts"], {
      TETHER_SERVER_URL: b.base,
      TETHER_PAIRING_CODE: code,
      TETHER_ROOTS: work,
      TETHER_CONFIG_DIR: configDir,
      TETHER_CONCURRENCY: "16",
    });
    children.push(device);
    await waitForLine(device, /connected to/, "stderr");
    device.stderr!.resume();
    const credentials = JSON.parse(await readFile(path.join(configDir, "credentials.json"), "utf8")) as { servers: Record<string, { deviceId: string }> };
    const deviceId = credentials.servers[b.base]!.deviceId;
    const call = { deviceId, tool: "stat", input: { path: "." } };
    const auth = { authorization: `Bearer ${token}` };
    for (let tries = 0; tries < 100 && !a.app.tetherHost.dispatcher.isOnline(deviceId); tries++) await new Promise((resolve) => setTimeout(resolve, 50));
    await post(`${a.base}/api/host/calls`, call, 10, 1, auth);
    const one = await latency(`${a.base}/api/host/calls`, call, seconds, auth);
    const many = await post(`${a.base}/api/host/calls`, call, 10, seconds, auth);
    device.kill("SIGTERM");
    return { one, many };
  } finally {
    await a.app.close();
    await b.app.close();
  }
}

/** Two `src/server.ts` replicas on PostgreSQL and Redis: calls to the stream's replica, then to the other. */
async function benchReplicaProcesses(work: string, seconds: number) {
  const postgresUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  if (!(await postgresReachable(postgresUrl))) return undefined;
  const cluster = await startReplicaCluster({
    postgresUrl,
    redisUrl: process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379",
    deviceRoot: work,
    startDevice: (serverUrl, code, configDir) =>
      startChild(["src/device/main.ts"], {
        TETHER_SERVER_URL: serverUrl,
        TETHER_PAIRING_CODE: code,
        TETHER_ROOTS: work,
        TETHER_CONFIG_DIR: configDir,
        TETHER_CONCURRENCY: "16",
      }),
  });
  try {
    const call = { deviceId: cluster.deviceId, tool: "stat", input: { path: "." } };
    const auth = { authorization: `Bearer ${cluster.token}` };
    const measure = async (base: string) => {
      await post(`${base}/api/host/calls`, call, 10, 1, auth);
      return { one: await latency(`${base}/api/host/calls`, call, seconds, auth), many: await post(`${base}/api/host/calls`, call, 10, seconds, auth) };
    };
    return { own: await measure(cluster.b), other: await measure(cluster.a) };
  } finally {
    await cluster.stop();
  }
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
    // The same call at 2026-07-28: no session, the `_meta` envelope and the standard headers on each request.
    const meta = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientInfo": { name: "bench", version: "1" },
      "io.modelcontextprotocol/clientCapabilities": {},
    };
    const modernCall = { ...mcpCall, params: { ...mcpCall.params, _meta: meta } };
    const modernHeaders = { ...mcpHeaders, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "stat" };
    await post(`${base}/mcp`, modernCall, 10, 1, modernHeaders);
    const modern1 = await latency(`${base}/mcp`, modernCall, SECONDS, modernHeaders);
    const modern10 = await post(`${base}/mcp`, modernCall, 10, SECONDS, modernHeaders);

    // The same question to the MCP filesystem server, over stdio through the MCP SDK's client.
    await writeFile(path.join(work, "probe.txt"), "probe\n");
    const mcp = await benchMcpFilesystem(work, path.join(work, "probe.txt"), SECONDS, 10);

    // Two replicas on one Redis: the call goes to A, the device's stream is on B.
    const cluster = await benchTwoReplicas(database, work, SECONDS, children);
    const processes = await benchReplicaProcesses(work, SECONDS);

    /** A row's "10 at once" columns: failures are non-2xx answers and connection errors alike. */
    const underLoad = (many: Awaited<ReturnType<typeof post>>) => ({ rps: many.rps, p99: many.p99, errors: many.non2xx + many.errors });
    const ms = (value: number, unit: "us" | "ms") => `${fmt(unit === "us" ? value / 1000 : value, 2)} ms`;
    const rows: Array<[string, { p50: number; p99: number; perSecond: number }, "us" | "ms", { rps: number; p99: number; errors: number }]> = [
      ["bare Fastify JSON POST (baseline)", bare1, "us", underLoad(bare10)],
      ["MCP filesystem get_file_info (stdio)", mcp.one, "ms", { rps: mcp.many.perSecond, p99: mcp.many.p99, errors: 0 }],
      ["Tether stat, one replica", calls1, "us", underLoad(calls10)],
      ["Tether stat via MCP tools/call on /mcp", mcp1, "us", underLoad(mcp10)],
      ["  the same at MCP 2026-07-28", modern1, "us", underLoad(modern10)],
      ["Tether stat, two replicas + Redis", cluster.one, "us", underLoad(cluster.many)],
    ];
    if (processes) {
      rows.push(["  processes on PostgreSQL: stream's replica", processes.own.one, "us", underLoad(processes.own.many)]);
      rows.push(["  processes on PostgreSQL: other replica", processes.other.one, "us", underLoad(processes.other.many)]);
    }
    const p50Ms = (row: (typeof rows)[number]) => (row[2] === "us" ? row[1].p50 / 1000 : row[1].p50);
    console.log(
      "One call at a time (latency)                     p50        p99       calls/s |  10 at once: calls/s   p99   | p50 vs bare  vs MCP | calls/s vs bare  vs MCP",
    );
    for (const row of rows) {
      const [name, one, unit, many] = row;
      const problems = many.errors > 0 ? `  (${many.errors} failed!)` : "";
      console.log(
        `  ${name.padEnd(40)} ${ms(one.p50, unit).padStart(9)}  ${ms(one.p99, unit).padStart(9)}  ${fmt(one.perSecond).padStart(8)}   | ${fmt(many.rps).padStart(12)}  ${ms(many.p99, "ms").padStart(9)} |` +
          ` ${fmt(p50Ms(row) / p50Ms(rows[0]!), 1).padStart(9)}× ${fmt(p50Ms(row) / p50Ms(rows[1]!), 1).padStart(6)}× | ${fmt((many.rps / rows[0]![3].rps) * 100, 1).padStart(12)}% ${fmt((many.rps / rows[1]![3].rps) * 100, 0).padStart(6)}%${problems}`,
      );
    }
    console.log(
      '("two replicas + Redis": two app instances in this one process on PGlite; "processes": two src/server.ts replicas on PostgreSQL + Redis, the device\'s stream on one of them.)',
    );
    if (!processes) console.log("(replica processes skipped: no PostgreSQL answered at BENCH_DATABASE_URL / TEST_DATABASE_URL / 127.0.0.1:5432)");
    console.log("Targets (issue 11): one replica p50 <= 1 ms and >= 3,000 calls/s at 10 connections; two replicas p50 <= 2 ms and >= 1,500 calls/s.");
    // The issue set them on a machine where the MCP filesystem server did ~7,000 calls/s and a bare Fastify POST
    // ~39,600 (its 752 calls/s were 1.9% of bare): the same bar as a share of each baseline is what to read on a
    // faster or slower machine. The two disagree where loopback HTTP and stdio differ in cost from that machine's.
    const ISSUE_MCP_RPS = 7_000;
    const ISSUE_BARE_RPS = 752 / 0.019;
    const verdict = (label: string, row: (typeof rows)[number], p50Limit: number, rpsLimit: number) => {
      const p50 = p50Ms(row);
      const rps = row[3].rps;
      const ofMcp = rps / rows[1]![3].rps;
      const ofBare = rps / rows[0]![3].rps;
      const met = p50 <= p50Limit && rps >= rpsLimit;
      console.log(
        `  ${label.padEnd(44)} p50 ${fmt(p50, 2)} ms, ${fmt(rps)} calls/s: ${met ? "met" : "not met"}; ` +
          `${fmt(ofMcp * 100, 0)}% of MCP (the bar: ${fmt((rpsLimit / ISSUE_MCP_RPS) * 100, 0)}%), ` +
          `${fmt(ofBare * 100, 1)}% of bare (the bar: ${fmt((rpsLimit / ISSUE_BARE_RPS) * 100, 1)}%)`,
      );
    };
    // Positions in `rows` above (the 2026-07-28 row sits after the 2025 /mcp row).
    verdict("one replica, PGlite", rows[2]!, 1, 3000);
    if (processes) verdict("one replica process, PostgreSQL + Redis", rows[6]!, 1, 3000);
    verdict("two replicas (app instances, PGlite + Redis)", rows[5]!, 2, 1500);
    if (processes) verdict("two replica processes, the other replica", rows[7]!, 2, 1500);
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
        `  idle device streams (SSE, keep-alives)     ${fmt(sse.perConnection / 1024, 1).padStart(6)} KB each (${fmt(sse.open)} open)  ${plain.perConnection > 1024 ? `${fmt(sse.perConnection / plain.perConnection, 1)}× the baseline` : "(the baseline is within the measurement's noise)"}\n` +
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
