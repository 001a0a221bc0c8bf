import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import type { Test } from "tap";
import { freePort } from "./app.js";
import { eventually } from "./eventually.js";

/**
 * A PostgreSQL of the test's own, on a free port, that the test may stop, restart or stall (never the
 * shared one), and the app as a child process; each is ended by its PID in a teardown, even on failure.
 * A Redis of a test's own is `startOwnRedis` (test/helpers/redis-server.ts).
 */

const PG_BIN = "/usr/lib/postgresql/15/bin";

/**
 * Why these tests cannot run here, or false. Missing binaries fail the tests under CI (which must run
 * them) and skip them with this reason elsewhere.
 */
export function chaosUnavailable(): string | false {
  if (process.env.CI === "true" || process.env.CI === "1") return false;
  if (!existsSync(`${PG_BIN}/postgres`)) return `no PostgreSQL binaries in ${PG_BIN}`;
  if (spawnSync("redis-server", ["--version"]).status !== 0) return "no redis-server on PATH";
  return false;
}

/** PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user. */
function clusterOwner(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(spawnSync("id", [flag, "postgres"], { encoding: "utf8" }).stdout.trim());
  return { uid: id("-u"), gid: id("-g") };
}

export interface OwnPostgres {
  url: string;
  /** The postmaster's PID while it runs. */
  readonly pid: number | undefined;
  start(): Promise<void>;
  /** Fast shutdown (SIGINT to the postmaster), waiting until it has exited. */
  stop(): Promise<void>;
  /** Runs SQL as the superuser on a connection of its own. */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]>;
}

export async function startOwnPostgres(t: Test): Promise<OwnPostgres> {
  const owner = clusterOwner();
  const dir = await mkdtemp(path.join(tmpdir(), "tether-chaos-pg-"));
  const dataDir = path.join(dir, "data");
  if (owner) await chown(dir, owner.uid, owner.gid);
  await chmod(dir, 0o700);
  const init = spawnSync(`${PG_BIN}/initdb`, ["-D", dataDir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"], {
    encoding: "utf8",
    ...owner,
  });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  let child: ChildProcess | undefined;
  let log = "";

  const isReady = async () => {
    const client = new pg.Client({ host: "127.0.0.1", port, user: "postgres", database: "postgres", connectionTimeoutMillis: 2_000 });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.query("select 1");
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => {});
    }
  };

  const handle: OwnPostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    get pid() {
      return child?.exitCode === null && child.signalCode === null ? child.pid : undefined;
    },
    async start() {
      const server = spawn(
        `${PG_BIN}/postgres`,
        ["-D", dataDir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", `unix_socket_directories=${dir}`, "-c", "fsync=off"],
        { stdio: ["ignore", "ignore", "pipe"], ...owner },
      );
      server.stderr.on("data", (chunk: Buffer) => (log = (log + chunk.toString()).slice(-4000)));
      child = server;
      const exited = new Promise<never>((_, reject) => server.once("exit", () => reject(new Error(`PostgreSQL exited while starting:\n${log}`))));
      exited.catch(() => {});
      await Promise.race([eventually(isReady, 60_000, () => `PostgreSQL to start:\n${log}`, 100), exited]);
    },
    async stop() {
      const server = child;
      if (!server || server.exitCode !== null || server.signalCode !== null) return;
      const exited = new Promise((resolve) => server.once("exit", resolve));
      server.kill("SIGINT");
      await exited;
    },
    async query(text, values) {
      const client = new pg.Client({ connectionString: handle.url });
      client.on("error", () => {});
      await client.connect();
      try {
        return (await client.query(text, values)).rows;
      } finally {
        await client.end().catch(() => {});
      }
    },
  };
  t.teardown(async () => {
    const server = child;
    if (!server?.pid || server.exitCode !== null || server.signalCode !== null) return rm(dir, { recursive: true, force: true });
    // A stopped (SIGSTOPped) backend would keep the shutdown waiting: resume everything first.
    spawnSync("pkill", ["-CONT", "-P", String(server.pid)]);
    const exited = new Promise((resolve) => server.once("exit", resolve));
    server.kill("SIGQUIT"); // immediate shutdown: nothing here needs to survive
    await Promise.race([exited, sleep(10_000)]);
    if (server.exitCode === null && server.signalCode === null) server.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  });
  await handle.start();
  return handle;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface ServerProcess {
  url: string;
  pid: number;
  /** Still running (a crash is observable here). */
  alive(): boolean;
  /** What it wrote to stdout and stderr so far. */
  output(): string;
}

const ROOT = path.resolve(import.meta.dirname, "../..");
export const CHAOS_SECRET = "chaos-secret-0123456789abcdef0123456789abcdef";

/** How `npm start` runs the app: TypeScript through tsx. */
export const DEV_SERVER = ["--import", "tsx", "src/server.ts"];
/** How production runs it: the compiled JavaScript of `npm run build`, on plain Node. */
export const BUILT_SERVER = ["dist/src/server.js"];

/** The app as `npm start` runs it (or as `entry` says), a child process ended by PID. */
export async function startServerProcess(t: Test, env: Record<string, string>, entry = DEV_SERVER): Promise<ServerProcess> {
  const port = await freePort();
  const url = `http://localhost:${port}`;
  const dataDir = await mkdtemp(path.join(tmpdir(), "tether-chaos-app-"));
  const child = spawn(process.execPath, entry, {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      PORT: String(port),
      BETTER_AUTH_URL: url,
      BETTER_AUTH_SECRET: CHAOS_SECRET,
      DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      // No background tether-host build in a test (host-build.ts): a test that wants one says so.
      HOST_BUILD_ON_START: "false",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const collect = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-200_000));
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    }
    await rm(dataDir, { recursive: true, force: true });
  });
  const alive = () => child.exitCode === null && child.signalCode === null;
  await eventually(async () => alive() && (await fetch(`${url}/healthz`)).status === 200, 180_000, "the server to start", 250).catch((error: Error) => {
    throw new Error(`${error.message}:\n${output}`);
  });
  return { url, pid: child.pid!, alive, output: () => output };
}

/**
 * Stalls backends with SIGSTOP, as a NAT that drops idle connections without a FIN would: no error, no data.
 * Returns `resume` (safe to call twice; a backend already gone is skipped), which also runs at teardown.
 */
export function stallBackends(t: Test, pids: number[]): () => void {
  for (const pid of pids) process.kill(pid, "SIGSTOP");
  const resume = () => {
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGCONT");
      } catch {
        // already gone
      }
    }
  };
  t.teardown(resume);
  return resume;
}
