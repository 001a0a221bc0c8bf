/**
 * `npm run bench -- noisy` (or `node --import tsx bench/noisy.ts`): no user's heavy use slows another
 * (issue 24). The server runs as production runs it (`src/server.ts`, `NODE_ENV=production`, so its rate
 * limits apply, and its default limits), in a process of its own: on PGlite, or on PostgreSQL + Redis
 * when `BENCH_DATABASE_URL` is set (`BENCH_REDIS_URL`, else the local Redis).
 *
 * Two self-registered accounts. Mallory has `sk_` tokens with `host:call`, several sessions and a paired
 * device (bench/noisy-device.ts, the wire protocol by hand, answering plans with the largest diff and
 * summary the protocol lets through). Bob asks `GET /api/me` at a steady pace from a process of his own.
 *
 * 1. Quiet: Bob's p50/p99 for `BENCH_NOISY_QUIET_SECONDS` (default 20) while Mallory's device idles.
 * 2. Noisy: Mallory runs every attack at once (bench/noisy-mallory.ts) for `BENCH_NOISY_SECONDS` (default
 *    60) while Bob is measured the same way. The target: p99 noisy ≤ 5 × p99 quiet.
 * 3. Quiet again, after Mallory stopped: how far the machine itself drifted meanwhile (other work on a
 *    shared machine moves both figures); each phase prints the machine's 1-minute load average.
 * The attack's connections: `BENCH_NOISY_CONNECTIONS` (`mcp,auth,calls,pages`, default `8,4,2,4`).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import pg from "pg";
import { freePort } from "../test/helpers/replica-process.js";
import { fmt, percentiles } from "./autocannon.js";
import { BENCH_ORIGIN, BENCH_SECRET } from "./bench-app.js";
import type { MalloryPlan } from "./noisy-mallory.js";

const QUIET_SECONDS = Number(process.env.BENCH_NOISY_QUIET_SECONDS ?? 20);
const NOISY_SECONDS = Number(process.env.BENCH_NOISY_SECONDS ?? 60);
const [MCP, AUTH, CALLS, PAGES] = (process.env.BENCH_NOISY_CONNECTIONS ?? "8,4,2,4").split(",").map(Number) as [number, number, number, number];
/** Bob asks once every this many milliseconds (an ordinary user's client, not a load generator). */
const BOB_INTERVAL_MS = 10;
/** Mallory's credentials: four tokens reach the default per-user cap of MCP streams (64, 16 per credential); the same for sessions and live views. */
const MALLORY_TOKENS = 4;
const MALLORY_SESSIONS = 4;
const TARGET = 5;
/** Node flags for the server process, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to see where its time goes (written when it stops). */
const serverFlags = (process.env.BENCH_NOISY_SERVER_FLAGS ?? "").split(" ").filter(Boolean);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..");
const run = promisify(execFile);

interface BobResult {
  count: number;
  p50: number;
  p99: number;
  max: number;
  failed: number;
}

/**
 * Bob's client (this file run with `--bob`): one keep-alive connection, `GET /api/me` every
 * `intervalMs` (at once when the last answer came late), each timed in microseconds.
 */
async function bobClient(url: string, cookie: string, seconds: number, intervalMs: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let failed = 0;
  const once = () =>
    new Promise<number>((resolve) => {
      const started = process.hrtime.bigint();
      const request = http.get(`${url}/api/me`, { agent, headers: { cookie } }, (response) => {
        response.resume().on("end", () => {
          if (response.statusCode !== 200) failed++;
          resolve(Number(process.hrtime.bigint() - started) / 1000);
        });
      });
      request.on("error", () => {
        failed++;
        resolve(Number(process.hrtime.bigint() - started) / 1000);
      });
    });
  for (let i = 0; i < 50; i++) await once(); // warm-up
  failed = 0;
  const samples: number[] = [];
  const start = Date.now();
  for (let k = 0; Date.now() < start + seconds * 1000; k++) {
    const wait = start + k * intervalMs - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    samples.push(await once());
  }
  const max = Math.max(...samples);
  process.stdout.write(`${JSON.stringify({ ...percentiles(samples, seconds), count: samples.length, max, failed })}\n`);
  agent.destroy();
}

async function bob(url: string, cookie: string, seconds: number): Promise<BobResult> {
  const { stdout } = await run(
    process.execPath,
    ["--import", "tsx", fileURLToPath(import.meta.url), "--bob", url, cookie, String(seconds), String(BOB_INTERVAL_MS)],
    { cwd: ROOT },
  );
  return JSON.parse(stdout) as BobResult;
}

function startChild(args: string[], env: Record<string, string> = {}, flags: string[] = []): ChildProcess {
  return spawn(process.execPath, [...flags, "--import", "tsx", ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
}

/** The first stdout line matching `pattern` (the child's exit before it is an error). */
function lineFrom(child: ChildProcess, pattern: RegExp, timeoutMs = 120_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffer = "";
    let errors = "";
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (errors = (errors + chunk).slice(-2000)));
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern}: ${buffer.slice(-500)} ${errors}`)), timeoutMs);
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      buffer += chunk;
      const match = buffer.split("\n").find((line) => pattern.test(line));
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`child exited (${code}) before ${pattern}: ${buffer.slice(-500)} ${errors}`));
    });
  });
}

async function json(response: Response): Promise<any> {
  if (response.status >= 300) throw new Error(`${response.url}: ${response.status} ${await response.text()}`);
  return response.json();
}

/** Signs up (or in) and returns the session cookie. */
async function session(base: string, route: "sign-up" | "sign-in", email: string): Promise<string> {
  const response = await fetch(`${base}/api/auth/${route}/email`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: email.split("@")[0], email, password: "noisy bench password" }),
  });
  await json(response);
  return response.headers.getSetCookie()[0]!.split(";")[0]!;
}

/** The server's resident memory now (Linux), in MB. */
async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => "");
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) / 1024;
}

/** PostgreSQL + Redis when BENCH_DATABASE_URL is set (a database made for the run), else PGlite in a temporary directory. */
async function storage(work: string): Promise<{ env: Record<string, string>; label: string; drop(): Promise<void> }> {
  const postgresUrl = process.env.BENCH_DATABASE_URL;
  if (!postgresUrl) return { env: { DATA_DIR: path.join(work, "data") }, label: "PGlite", drop: async () => {} };
  const name = `tether_noisy_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: postgresUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(postgresUrl);
  url.pathname = `/${name}`;
  const redisUrl = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";
  return {
    env: { DATABASE_URL: url.toString(), REDIS_URL: redisUrl },
    label: "PostgreSQL + Redis",
    drop: async () => {
      const cleanup = new pg.Client({ connectionString: postgresUrl });
      await cleanup.connect();
      await cleanup.query(`drop database if exists ${name} with (force)`).catch(() => {});
      await cleanup.end();
    },
  };
}

export async function benchNoisy(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), "tether-bench-noisy-"));
  const store = await storage(work);
  const children: ChildProcess[] = [];
  try {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    // Production as `npm start` runs it: its rate limits and every default limit.
    const server = startChild(
      ["src/server.ts"],
      {
        NODE_ENV: "production",
        PORT: String(port),
        HOST: "127.0.0.1",
        BETTER_AUTH_SECRET: BENCH_SECRET,
        BETTER_AUTH_URL: BENCH_ORIGIN,
        LOG_LEVEL: "warn",
        ...store.env,
      },
      serverFlags,
    );
    children.push(server);
    let serverOutput = "";
    server.stdout!.resume();
    server.stderr!.setEncoding("utf8").on("data", (chunk: string) => (serverOutput = (serverOutput + chunk).slice(-2000)));
    // Up to three minutes: on a loaded machine, compiling and migrating takes a while.
    for (
      let tries = 0;
      !(await fetch(`${base}/healthz`).then(
        (r) => r.ok,
        () => false,
      ));
      tries++
    ) {
      if (server.exitCode !== null || tries > 1800) throw new Error(`the server did not start (${server.exitCode}): ${serverOutput}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    console.log("\n## Noisy neighbour: another user's GET /api/me while one account attacks (issue 24)");
    console.log(
      `(src/server.ts in production mode on ${store.label}, its own process; Bob asks every ${BOB_INTERVAL_MS} ms from his own process; ` +
        `Mallory: ${MALLORY_TOKENS} tokens, ${MALLORY_SESSIONS} sessions, a device planning the largest diffs, connections /mcp ${MCP}, auth ${AUTH}, calls ${CALLS}, /devices ${PAGES})\n`,
    );

    const bobCookie = await session(base, "sign-up", `bob-${process.pid}@example.com`);
    const malloryEmail = `mallory-${process.pid}@example.com`;
    const cookies = [await session(base, "sign-up", malloryEmail)];
    for (let i = 1; i < MALLORY_SESSIONS; i++) cookies.push(await session(base, "sign-in", malloryEmail));
    const asMallory = { cookie: cookies[0]!, origin: BENCH_ORIGIN, "content-type": "application/json" };
    const tokens: string[] = [];
    for (let i = 0; i < MALLORY_TOKENS; i++) {
      tokens.push(
        (await json(await fetch(`${base}/api/tokens`, { method: "POST", headers: asMallory, body: JSON.stringify({ name: `m${i}`, scopes: ["host:call"] }) })))
          .token,
      );
    }
    const { code } = await json(await fetch(`${base}/api/host/pairing-codes`, { method: "POST", headers: asMallory, body: "{}" }));
    const device = startChild([path.join(HERE, "noisy-device.ts"), base, code]);
    children.push(device);
    const deviceId = (await lineFrom(device, /^connected /)).split(" ")[1]!;

    const quiet = await bob(base, bobCookie, QUIET_SECONDS);
    const quietLoad = os.loadavg()[0]!;
    const quietRss = await rssMb(server.pid!);

    const plan: MalloryPlan = {
      url: base,
      origin: BENCH_ORIGIN,
      email: malloryEmail,
      deviceId,
      tokens,
      cookies,
      connections: { mcp: MCP, auth: AUTH, calls: CALLS, pages: PAGES },
    };
    const mallory = startChild([path.join(HERE, "noisy-mallory.ts"), JSON.stringify(plan)]);
    children.push(mallory);
    const ready = await lineFrom(mallory, /^ready /);
    let peakRss = quietRss;
    const sampler = setInterval(() => void rssMb(server.pid!).then((mb) => (peakRss = Math.max(peakRss, mb))), 500);
    const noisy = await bob(base, bobCookie, NOISY_SECONDS);
    const noisyLoad = os.loadavg()[0]!;
    clearInterval(sampler);
    const report = lineFrom(mallory, /^\{/);
    mallory.kill("SIGTERM");
    const got = JSON.parse(await report) as MalloryReport;
    const served = lineFrom(device, /^served /);
    device.kill("SIGTERM");
    const [, plans] = (await served).split(" ");
    // The same quiet measurement once more: how much the machine itself drifted meanwhile (other work on it).
    const after = await bob(base, bobCookie, QUIET_SECONDS);
    const afterLoad = os.loadavg()[0]!;

    const ms = (us: number) => `${fmt(us / 1000, 2)} ms`;
    const line = (label: string, r: BobResult, seconds: number, extra: string) =>
      console.log(
        `  ${label.padEnd(44)} p50 ${ms(r.p50).padStart(9)}  p99 ${ms(r.p99).padStart(9)}  max ${ms(r.max).padStart(9)}  (${fmt(r.count)} requests in ${seconds} s${r.failed ? `, ${r.failed} failed!` : ""})${extra}`,
      );
    const load = (value: number) => `   load ${fmt(value, 1)}`;
    line("Bob's GET /api/me, quiet server", quiet, QUIET_SECONDS, load(quietLoad));
    line("Bob's GET /api/me, Mallory attacking", noisy, NOISY_SECONDS, load(noisyLoad));
    line("  quiet again, after the attack (drift)", after, QUIET_SECONDS, load(afterLoad));
    const ratio = noisy.p99 / quiet.p99;
    console.log(`  p99 noisy / quiet: ${fmt(ratio, 2)}× (target ≤ ${TARGET}×): ${ratio <= TARGET && noisy.failed === 0 ? "met" : "NOT MET"}`);
    console.log(`  Mallory got (${ready.split(" ").slice(1).join(" / ")} MCP streams / live views open at first):`);
    console.log(`    MCP streams admitted ${got.mcpStreams.admitted}, refused ${statuses(got.mcpStreams.refused)}`);
    console.log(`    /devices live views admitted ${got.liveViews.admitted}, refused ${statuses(got.liveViews.refused)}`);
    console.log(`    POST /mcp ${statuses(got.mcp)}`);
    console.log(`    auth API ${statuses(got.auth)}`);
    console.log(`    POST /api/host/calls (mutate) ${statuses(got.calls)}`);
    console.log(`    /devices and its proposals panel ${statuses(got.pages)}, largest ${fmt(got.pageBytes / 1024)} KB`);
    console.log(`    her device planned ${plans} times; connection errors ${got.errors}`);
    console.log(`  server RSS: ${fmt(quietRss)} MB quiet, peak ${fmt(peakRss)} MB under attack`);
    // A graceful stop, so a --cpu-prof profile is written.
    const stopped = new Promise((resolve) => server.once("exit", resolve));
    server.kill("SIGTERM");
    await Promise.race([stopped, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  } finally {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await Promise.all(children.filter((c) => c.exitCode === null && c.signalCode === null).map((c) => new Promise((resolve) => c.once("exit", resolve))));
    await store.drop();
    await rm(work, { recursive: true, force: true });
  }
}

interface MalloryReport {
  mcpStreams: { admitted: number; refused: Record<string, number> };
  liveViews: { admitted: number; refused: Record<string, number> };
  mcp: Record<string, number>;
  auth: Record<string, number>;
  calls: Record<string, number>;
  pages: Record<string, number>;
  pageBytes: number;
  errors: number;
}

/** `{ "200": 5, "429": 1000 }` as `5 × 200, 1,000 × 429`. */
function statuses(counts: Record<string, number>): string {
  const entries = Object.entries(counts);
  if (entries.length === 0) return "none";
  return entries.map(([status, n]) => `${fmt(n)} × ${status}`).join(", ");
}

if (process.argv[2] === "--bob") {
  await bobClient(process.argv[3]!, process.argv[4]!, Number(process.argv[5]), Number(process.argv[6]));
} else if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await benchNoisy();
  process.exit(0);
}
