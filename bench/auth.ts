import Fastify from "fastify";
import pg from "pg";
import { openDatabase, type DatabaseTarget } from "../src/db/connect.js";
import { fmt, load, ratio, type LoadResult } from "./autocannon.js";
import { startBenchApp } from "./bench-app.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const POSTGRES_URL = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** `GET /api/me` with a cookie and with a token, against a bare Fastify JSON route, on each database. */
export async function benchAuth(): Promise<void> {
  console.log("\n## Session resolution: GET /api/me vs a bare Fastify JSON route");
  console.log(`(autocannon, 10 connections, ${SECONDS}s each, load generator in its own process)\n`);

  const bare = Fastify();
  bare.get("/bare", async () => ({ user: { id: "u", name: "n", email: "e", isSiteAdmin: false }, via: "cookie" }));
  await bare.listen({ port: 0, host: "127.0.0.1" });
  const bareUrl = `http://127.0.0.1:${(bare.server.address() as { port: number }).port}/bare`;
  await load(bareUrl, { seconds: 1 }); // warm-up
  const baseline = await load(bareUrl, { seconds: SECONDS });
  await bare.close();
  row("bare Fastify route (baseline)", baseline, baseline);

  await benchOn("PGlite (embedded)", { kind: "pglite-memory" }, baseline);
  if (await postgresReachable()) {
    await benchOn("PostgreSQL", { kind: "postgres", url: POSTGRES_URL, schema: `bench_${process.pid}` }, baseline);
  } else {
    console.log(`PostgreSQL: skipped (no server at ${POSTGRES_URL})`);
  }
}

async function benchOn(label: string, target: DatabaseTarget, baseline: LoadResult): Promise<void> {
  if (target.kind === "postgres") await withPool(target.url, (c) => c.query(`create schema if not exists ${target.schema}`));
  const database = await openDatabase(target);
  try {
    const { app, base, cookie, mintToken } = await startBenchApp(database);
    const token = await mintToken();

    await load(`${base}/api/me`, { seconds: 1, headers: { cookie } }); // warm-up
    const viaCookie = await load(`${base}/api/me`, { seconds: SECONDS, headers: { cookie } });
    const viaToken = await load(`${base}/api/me`, { seconds: SECONDS, headers: { authorization: `Bearer ${token}` } });
    row(`${label}: /api/me with cookie`, viaCookie, baseline);
    row(`${label}: /api/me with token`, viaToken, baseline);
    await app.close();
  } finally {
    if (target.kind === "postgres")
      await database.db.schema
        .dropSchema(target.schema!)
        .ifExists()
        .cascade()
        .execute()
        .catch(() => {});
    await database.close();
  }
}

function row(label: string, result: LoadResult, baseline: LoadResult): void {
  const errors = result.non2xx > 0 ? `  (${result.non2xx} non-2xx!)` : "";
  console.log(
    `${label.padEnd(40)} ${fmt(result.requestsPerSecond).padStart(8)} req/s  ${fmt(ratio(result.requestsPerSecond, baseline.requestsPerSecond) * 100, 1).padStart(5)}% of bare   p99 ${fmt(result.p99Ms, 1)} ms (bare ${fmt(baseline.p99Ms, 1)} ms)${errors}`,
  );
}

async function postgresReachable(): Promise<boolean> {
  try {
    await withPool(POSTGRES_URL, (c) => c.query("select 1"));
    return true;
  } catch {
    return false;
  }
}

async function withPool<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchAuth();
