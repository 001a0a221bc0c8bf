import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { Test } from "tap";
import { TEST_SECRET } from "../../helpers/app.js";
import { freePort, spawnReplica } from "../../helpers/replica-process.js";
import { TEST_DATABASE_URL } from "../../helpers/database.js";
import { eventually } from "../../helpers/eventually.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
/** The nginx configuration the README documents; the test runs exactly it, on its own ports. */
export const NGINX_CONF = path.join(ROOT, "deploy/nginx/tether.conf");

/** A PostgreSQL database of the test's own on the shared server, dropped at the end. */
export async function ownPostgres(t: Test): Promise<string> {
  const adminUrl = TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const name = `tether_cluster_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  t.teardown(async () => {
    const cleanup = new pg.Client({ connectionString: adminUrl });
    await cleanup.connect();
    await cleanup.query(`drop database if exists ${name} with (force)`).catch(() => {});
    await cleanup.end();
  });
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export interface Replica {
  port: number;
  url: string;
  child: ChildProcess;
  /** Its id in Redis (from its start-up log line). */
  replicaId: string;
  log: string[];
}

export interface ReplicaEnv {
  databaseUrl: string;
  redisUrl: string;
  publicUrl: string;
}

/**
 * One replica: `src/server.ts` in its own process, as production runs it. Killed by PID when `t` ends,
 * whatever happened: pass the test the replica must outlive (a replica started inside a subtest for
 * the rest of the file belongs to the file's test, or it dies with the subtest).
 */
export async function startReplica(t: Test, env: ReplicaEnv, port: number): Promise<Replica> {
  const child = spawnReplica({ port, ...env, secret: TEST_SECRET, env: { TRUST_PROXY: "127.0.0.1", LOG_LEVEL: "info" } });
  let tornDown = false;
  t.teardown(() => {
    tornDown = true;
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const log: string[] = [];
  for (const stream of [child.stdout!, child.stderr!]) stream.setEncoding("utf8").on("data", (chunk: string) => log.push(...chunk.split("\n").filter(Boolean)));
  // Every exit before the teardown is told, with its signal (the test's own SIGKILL too), so a replica
  // that vanishes is never silent.
  child.once("exit", (code, signal) => {
    if (!tornDown) t.comment(`replica on ${port} exited (${code ?? signal})${signal ? "" : `:\n${log.slice(-15).join("\n")}`}`);
  });
  const url = `http://127.0.0.1:${port}`;
  // A replica that exits ends the wait at once, and says why.
  await eventually(async () => child.exitCode !== null || (await fetch(`${url}/healthz`)).status === 200, 120_000, `the replica on ${port} to be healthy`);
  if (child.exitCode !== null) throw new Error(`replica on ${port} exited: ${log.slice(-10).join("\n")}`);
  const line = log.find((entry) => entry.includes('"replica"'));
  const replicaId = line ? (JSON.parse(line) as { replica: string }).replica : "";
  return { port, url, child, replicaId, log };
}

/** nginx in front of the replicas, from deploy/nginx/tether.conf with the test's ports in it. */
export async function startNginx(t: Test, work: string, listenPort: number, replicaPorts: number[]): Promise<void> {
  const site = (await readFile(NGINX_CONF, "utf8"))
    .replace(/^\s*server 127\.0\.0\.1:\d+ .*$\n/gm, "")
    .replace("upstream tether {", `upstream tether {\n${replicaPorts.map((p) => `    server 127.0.0.1:${p} max_fails=1 fail_timeout=2s;`).join("\n")}`)
    .replace(/listen 127\.0\.0\.1:\d+;/, `listen 127.0.0.1:${listenPort};`);
  await writeFile(path.join(work, "tether.conf"), site);
  await writeFile(
    path.join(work, "nginx.conf"),
    [
      "daemon off;",
      // One process, so ending it by its PID ends nginx (no orphaned workers).
      "master_process off;",
      "worker_processes 1;",
      `pid ${work}/nginx.pid;`,
      `error_log ${work}/nginx-error.log warn;`,
      "events { worker_connections 256; }",
      "http {",
      "  access_log off;",
      ...["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((kind) => `  ${kind}_temp_path ${work}/${kind}_temp;`),
      `  include ${work}/tether.conf;`,
      "}",
    ].join("\n"),
  );
  const child = spawn("nginx", ["-p", work, "-c", path.join(work, "nginx.conf")], { stdio: "ignore" });
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  await eventually(async () => (await fetch(`http://127.0.0.1:${listenPort}/healthz`).catch(() => undefined))?.status === 200, 30_000, "nginx in front");
}

export { freePort };
