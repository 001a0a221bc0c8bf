/**
 * Two replicas as production runs them: `src/server.ts` in two processes of their own, on one
 * PostgreSQL database (made for the run, dropped after) and one Redis. The device's stream is on B;
 * calls go to A (every call crosses Redis both ways) and, for comparison, to B (one replica process
 * on PostgreSQL, the stream's own). Every process is ended by its PID, whatever happens.
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { freePort, spawnReplica } from "../test/helpers/replica-process.js";
import { BENCH_SECRET } from "./bench-app.js";

/** The replicas' public address: the origin the bench's session requests name. */
const PUBLIC_URL = "http://127.0.0.1";

export interface ReplicaCluster {
  /** The replica that receives the calls. */
  a: string;
  /** The replica that holds the device's stream. */
  b: string;
  token: string;
  deviceId: string;
  stop(): Promise<void>;
}

/** Whether a PostgreSQL server answers at `url` (the section is skipped, with the reason, when not). */
export async function postgresReachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Polls `check` until it is true; a check that throws ends the wait with its error (a replica that exited). */
async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export async function startReplicaCluster(options: {
  postgresUrl: string;
  redisUrl: string;
  deviceRoot: string;
  startDevice: (serverUrl: string, code: string, configDir: string) => ChildProcess;
}): Promise<ReplicaCluster> {
  const children: ChildProcess[] = [];
  const database = `tether_bench_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: options.postgresUrl });
  await admin.connect();
  await admin.query(`create database ${database}`);
  await admin.end();
  const databaseUrl = new URL(options.postgresUrl);
  databaseUrl.pathname = `/${database}`;

  const stop = async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await Promise.all(
      children.filter((child) => child.exitCode === null && child.signalCode === null).map((child) => new Promise((resolve) => child.once("exit", resolve))),
    );
    const cleanup = new pg.Client({ connectionString: options.postgresUrl });
    await cleanup.connect();
    await cleanup.query(`drop database if exists ${database} with (force)`).catch(() => {});
    await cleanup.end();
  };

  const startReplica = async (): Promise<string> => {
    const port = await freePort();
    const child = spawnReplica({
      port,
      databaseUrl: databaseUrl.toString(),
      redisUrl: options.redisUrl,
      publicUrl: PUBLIC_URL,
      secret: BENCH_SECRET,
      // As the in-process bench app: no connection cap, no cap on requests per keep-alive socket.
      env: { LOG_LEVEL: "warn", MAX_CONNECTIONS: "0", MAX_REQUESTS_PER_SOCKET: "0" },
    });
    child.stdout!.resume();
    child.stderr!.resume();
    children.push(child);
    const url = `http://127.0.0.1:${port}`;
    await waitFor(`the replica on ${port}`, async () => {
      if (child.exitCode !== null) throw new Error(`the replica on ${port} exited (${child.exitCode})`);
      return fetch(`${url}/healthz`).then(
        (response) => response.status === 200,
        () => false,
      );
    });
    return url;
  };

  try {
    // The first replica alone runs the migrations; then the second.
    const a = await startReplica();
    const b = await startReplica();
    const signUp = await fetch(`${a}/api/auth/sign-up/email`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "Bench", email: `bench-${process.pid}@example.com`, password: "bench password" }),
    });
    const cookie = signUp.headers.getSetCookie()[0]!.split(";")[0]!;
    const session = { cookie, origin: PUBLIC_URL, "content-type": "application/json" };
    const created = await fetch(`${a}/api/tokens`, { method: "POST", headers: session, body: JSON.stringify({ name: "bench", scopes: ["host:call"] }) });
    const { token } = (await created.json()) as { token: string };
    const { code } = (await (await fetch(`${a}/api/host/pairing-codes`, { method: "POST", headers: session, body: "{}" })).json()) as { code: string };

    const configDir = path.join(options.deviceRoot, "config-replicas");
    const device = options.startDevice(b, code, configDir);
    children.push(device);
    await waitFor("the device's credentials", async () => {
      if (device.exitCode !== null) throw new Error(`the device exited (${device.exitCode}) before pairing`);
      return (await readFile(path.join(configDir, "credentials.json"), "utf8").catch(() => "")).includes(b);
    });
    const credentials = JSON.parse(await readFile(path.join(configDir, "credentials.json"), "utf8")) as { servers: Record<string, { deviceId: string }> };
    const deviceId = credentials.servers[b]!.deviceId;
    // Online as A sees it (through Redis) before the first measured call.
    await waitFor("the device online on A", async () => {
      const listed = (await (await fetch(`${a}/api/host/devices`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
        devices: Array<{ id: string; online: boolean }>;
      };
      return listed.devices.some((d) => d.id === deviceId && d.online);
    });
    return { a, b, token, deviceId, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
