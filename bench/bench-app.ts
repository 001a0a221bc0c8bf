import { buildApp, type App } from "../src/app.js";
import { loadConfig } from "../src/config/env.js";
import type { DatabaseHandle } from "../src/db/connect.js";
import { migrateToLatest } from "../src/db/migrate.js";
import { allMigrations } from "../migrations/index.js";

export const BENCH_ORIGIN = "http://127.0.0.1";
/** The `BETTER_AUTH_SECRET` of every app the bench starts, in its process or as a replica process. */
export const BENCH_SECRET = "bench-secret-0123456789abcdef0123456789abcdef";

export interface BenchApp {
  app: App;
  base: string;
  /** A signed-up user's session cookie (`name=value`). */
  cookie: string;
  /** Mints an API token for that user. */
  mintToken(this: void, scopes?: string[]): Promise<string>;
}

/** The example app on `database`, listening on loopback, with one signed-up user. */
/** With `redisUrl`, the app is one of several replicas sharing a dispatcher through that Redis. */
/** `env`: further settings (the noisy-neighbour run turns production limits on). */
export async function startBenchApp(database: DatabaseHandle, options: { redisUrl?: string; env?: Record<string, string> } = {}): Promise<BenchApp> {
  await migrateToLatest(database.db, allMigrations);
  const app = await buildApp({
    // No connection cap and no stream caps (the idle-stream run opens thousands of device streams of
    // one user at once), and no cap on requests per keep-alive connection: past it Node answers 503 to
    // clients that, like autocannon, do not honour `Connection: close`, which would count as calls.
    config: loadConfig({
      NODE_ENV: "bench",
      BETTER_AUTH_URL: BENCH_ORIGIN,
      MAX_CONNECTIONS: "0",
      MAX_REQUESTS_PER_SOCKET: "0",
      STREAMS_PER_USER: "0",
      STREAMS_PER_CREDENTIAL: "0",
      ...(options.redisUrl ? { REDIS_URL: options.redisUrl } : {}),
      ...options.env,
    }),
    db: database.db,
    listen: database.listen,
    secret: BENCH_SECRET,
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const signUp = await fetch(`${base}/api/auth/sign-up/email`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "Bench", email: `bench-${process.pid}-${Date.now()}@example.com`, password: "bench password" }),
  });
  const cookie = signUp.headers.getSetCookie()[0]!.split(";")[0]!;
  const mintToken = async (scopes: string[] = []) => {
    const created = await fetch(`${base}/api/tokens`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie, origin: BENCH_ORIGIN },
      body: JSON.stringify({ name: "bench", scopes }),
    });
    return ((await created.json()) as { token: string }).token;
  };
  return { app, base, cookie, mintToken };
}
