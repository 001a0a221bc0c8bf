/**
 * `npm run bench -- mcp`: the cost of one `stat` through `/mcp` at both revisions (2025-11-25 and
 * 2026-07-28), beside the same call through `POST /api/host/calls` and the MCP filesystem server's
 * `get_file_info` over stdio, in one run. The server is `src/server.ts` in a process of its own
 * (embedded PGlite, development limits off), the device the real runtime in another, autocannon in a
 * third. Besides calls/s (10 connections), each row gives the server process's CPU time per call, read
 * from /proc: on a machine shared with other work it moves far less than calls/s does. The rows run in
 * `BENCH_ROUNDS` interleaved rounds (default 3); each figure is its row's median.
 * `BENCH_CPU_PROFILE=<dir>` starts the server with `--cpu-prof` into that directory; with
 * `BENCH_MCP_ROW=<text>` only the rows whose name contains that text run (a profile of one path alone).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { fmt, load } from "./autocannon.js";
import { BENCH_SECRET } from "./bench-app.js";
import { benchMcpFilesystem } from "./mcp-baseline.js";
import { freePort } from "../test/helpers/replica-process.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ORIGIN = "http://127.0.0.1";
const MODERN_META = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "bench", version: "1" },
  "io.modelcontextprotocol/clientCapabilities": {},
};

/** User plus system CPU time of a process so far, in microseconds (Linux /proc; clock ticks are 10 ms). */
async function cpuMicros(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, "utf8")).split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

function child(args: string[], env: Record<string, string>, execArgv: string[] = []): ChildProcess {
  return spawn(process.execPath, [...execArgv, "--import", "tsx", ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
}

function waitForOutput(process: ChildProcess, pattern: RegExp, timeoutMs = 90_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern}: ${seen.slice(-500)}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      if (pattern.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    };
    process.stdout!.on("data", onData);
    process.stderr!.on("data", onData);
    process.once("exit", (code) => reject(new Error(`exited (${code}) before ${pattern}: ${seen.slice(-500)}`)));
  });
}

/** Polls `/healthz` until the server answers (a server that exits ends the wait with its output). */
async function waitForHealth(base: string, server: ChildProcess, timeoutMs = 90_000): Promise<void> {
  let output = "";
  server.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`the server exited (${server.exitCode}): ${output.slice(-500)}`);
    if (
      await fetch(`${base}/healthz`).then(
        (response) => response.ok,
        () => false,
      )
    )
      return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the server did not answer /healthz: ${output.slice(-500)}`);
}

/** A signed-up user's API token and a paired device, on the server at `base`. */
async function prepare(base: string, work: string, children: ChildProcess[]): Promise<{ token: string; deviceId: string }> {
  const signUp = await fetch(`${base}/api/auth/sign-up/email`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: ORIGIN },
    body: JSON.stringify({ name: "Bench", email: `bench-${Date.now()}@example.com`, password: "bench password" }),
  });
  const cookie = signUp.headers.getSetCookie()[0]!.split(";")[0]!;
  const session = { cookie, origin: ORIGIN, "content-type": "application/json" };
  const created = await fetch(`${base}/api/tokens`, { method: "POST", headers: session, body: JSON.stringify({ name: "bench", scopes: ["host:call"] }) });
  const { token } = (await created.json()) as { token: string };
  const { code } = (await (await fetch(`${base}/api/host/pairing-codes`, { method: "POST", headers: session, body: "{}" })).json()) as { code: string };
  const configDir = path.join(work, "device");
  const device = child(["src/device/main.ts"], {
    TETHER_SERVER_URL: base,
    TETHER_PAIRING_CODE: code,
    TETHER_ROOTS: work,
    TETHER_CONFIG_DIR: configDir,
    TETHER_CONCURRENCY: "16",
  });
  children.push(device);
  await waitForOutput(device, /connected to/);
  const credentials = JSON.parse(await readFile(path.join(configDir, "credentials.json"), "utf8")) as { servers: Record<string, { deviceId: string }> };
  return { token, deviceId: Object.values(credentials.servers)[0]!.deviceId };
}

interface Row {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  failed: number;
  /** Server CPU per call, microseconds (undefined: not this server's). */
  cpu?: number;
}

export async function benchMcp(): Promise<void> {
  console.log("\n## MCP: a stat through /mcp at both revisions, beside POST /api/host/calls and the MCP filesystem server");
  console.log(
    `(server, device and autocannon each in a process of their own; 10 connections, ${SECONDS}s per row and round, the median of ${ROUNDS} rounds)\n`,
  );
  const work = await mkdtemp(path.join(os.tmpdir(), "tether-bench-mcp-"));
  const children: ChildProcess[] = [];
  try {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const profileDir = process.env.BENCH_CPU_PROFILE;
    const server = child(
      ["src/server.ts"],
      {
        PORT: String(port),
        HOST: "127.0.0.1",
        DATA_DIR: path.join(work, "data"),
        BETTER_AUTH_URL: ORIGIN,
        BETTER_AUTH_SECRET: BENCH_SECRET,
        HOST_BUILD_ON_START: "false",
        LOG_LEVEL: "warn",
        // As the other benches: no connection cap, no cap on requests per keep-alive socket, no MCP rate limit.
        MAX_CONNECTIONS: "0",
        MAX_REQUESTS_PER_SOCKET: "0",
        MCP_RATE_LIMIT: "0",
      },
      profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [],
    );
    children.push(server);
    await waitForHealth(base, server);
    const { token, deviceId } = await prepare(base, work, children);
    const auth = { authorization: `Bearer ${token}` };
    const mcpHeaders = { ...auth, accept: "application/json, text/event-stream" };
    const call = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "stat", arguments: { device: deviceId, path: "." } } };
    const allTargets: Array<[string, string, unknown, Record<string, string>]> = [
      ["POST /api/host/calls", "/api/host/calls", { deviceId, tool: "stat", input: { path: "." } }, auth],
      ["/mcp tools/call, MCP 2025-11-25", "/mcp", call, { ...mcpHeaders, "mcp-protocol-version": "2025-11-25" }],
      [
        "/mcp tools/call, MCP 2026-07-28",
        "/mcp",
        { ...call, params: { ...call.params, _meta: MODERN_META } },
        { ...mcpHeaders, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "stat" },
      ],
    ];
    const only = process.env.BENCH_MCP_ROW;
    const targets = only ? allTargets.filter(([name]) => name.includes(only)) : allTargets;
    // Rounds interleave the rows, and each row reports its median round: other work on a shared machine
    // then weighs on every row alike instead of on whichever row ran while it did.
    const rounds: Row[][] = targets.map(() => []);
    for (const [, route, body, headers] of targets) await load(`${base}${route}`, { json: body, headers, connections: 10, seconds: 1 }); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      for (const [index, [name, route, body, headers]] of targets.entries()) {
        const before = await cpuMicros(server.pid!);
        const result = await load(`${base}${route}`, { json: body, headers, connections: 10, seconds: SECONDS });
        const cpu = (await cpuMicros(server.pid!)) - before;
        const calls = result.requestsPerSecond * SECONDS;
        rounds[index]!.push({
          name,
          rps: result.requestsPerSecond,
          p50: result.p50Ms,
          p99: result.p99Ms,
          failed: result.non2xx + result.errors,
          cpu: calls > 0 ? cpu / calls : undefined,
        });
      }
    }
    const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const rows: Row[] = rounds.map((measured) => ({
      name: measured[0]!.name,
      rps: median(measured.map((row) => row.rps)),
      p50: median(measured.map((row) => row.p50)),
      p99: median(measured.map((row) => row.p99)),
      failed: measured.reduce((sum, row) => sum + row.failed, 0),
      cpu: median(measured.map((row) => row.cpu ?? 0)),
    }));
    if (only) {
      for (const row of rows) console.log(`  ${row.name.padEnd(38)} ${fmt(row.rps).padStart(7)} calls/s, ${fmt((row.cpu ?? 0) / 1000, 2)} ms CPU per call`);
      return;
    }
    await writeFile(path.join(work, "probe.txt"), "probe\n");
    const stdio = await benchMcpFilesystem(work, path.join(work, "probe.txt"), SECONDS, 10);
    rows.push({ name: "MCP filesystem get_file_info (stdio)", rps: stdio.many.perSecond, p50: stdio.many.p50, p99: stdio.many.p99, failed: 0 });

    const calls = rows[0]!;
    console.log("                                         calls/s    p50      p99   | server CPU per call | vs /api/host/calls: calls/s  CPU");
    for (const row of rows) {
      const cpu = row.cpu === undefined ? "".padStart(10) : `${fmt(row.cpu / 1000, 2).padStart(7)} ms`;
      const vsCpu = row.cpu === undefined || calls.cpu === undefined ? "" : `${fmt((row.cpu / calls.cpu) * 100, 0).padStart(5)}%`;
      console.log(
        `  ${row.name.padEnd(38)} ${fmt(row.rps).padStart(7)} ${fmt(row.p50, 1).padStart(6)} ms ${fmt(row.p99, 1).padStart(6)} ms | ${cpu.padStart(19)} | ${fmt((row.rps / calls.rps) * 100, 0).padStart(26)}% ${vsCpu}` +
          (row.failed > 0 ? `  (${row.failed} failed!)` : ""),
      );
    }
    const modern = rows[2]!;
    console.log(
      `Target (issue 27): /mcp at 2026-07-28 within 80% of POST /api/host/calls: ${fmt((modern.rps / calls.rps) * 100, 0)}% of its calls/s, ${modern.rps >= 0.8 * calls.rps ? "met" : "not met"}.`,
    );
  } finally {
    for (const process of children) if (process.exitCode === null && process.signalCode === null) process.kill("SIGTERM");
    await Promise.all(children.filter((p) => p.exitCode === null && p.signalCode === null).map((p) => new Promise((resolve) => p.once("exit", resolve))));
    await rm(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await benchMcp();
  process.exit(0);
}
