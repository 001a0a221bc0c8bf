import type { FastifyInstance } from "fastify";
import { Redis } from "ioredis";
import type { Test } from "tap";
import { buildApp, type App } from "../../src/app.js";
import { loadConfig } from "../../src/config/env.js";
import type { DatabaseHandle } from "../../src/db/connect.js";
import { openTestDatabase, TEST_REDIS_URL } from "./database.js";
import { freePort } from "./replica-process.js";

export { freePort };

export const TEST_SECRET = "test-secret-0123456789abcdef0123456789abcdef";

export interface TestApp {
  app: App;
  /** `http://localhost:<port>`: also the auth base URL, so it is the trusted origin. */
  url: string;
  database: DatabaseHandle;
  redis: Redis | undefined;
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  /** Connect to TEST_REDIS_URL and use it as better-auth's secondary storage. */
  redis?: boolean;
  /** Listen on this port (e.g. to restart a server where its clients expect it); default a free one. */
  port?: number;
  /** Share an existing database (e.g. two app instances on one database). */
  database?: DatabaseHandle;
  /** Runs before the server starts listening: register extra routes here. */
  beforeListen?: (app: App) => Promise<void> | void;
}

/** The example app over real HTTP on loopback, on a database of its own; closed at the end of `t`. */
export async function startTestApp(t: Test, options: TestAppOptions = {}): Promise<TestApp> {
  const port = options.port ?? (await freePort());
  const url = `http://localhost:${port}`;
  const config = loadConfig({ NODE_ENV: "test", BETTER_AUTH_URL: url, PORT: String(port), ...options.env });
  const ownDatabase = !options.database;
  const database = options.database ?? (await openTestDatabase());
  const redis = options.redis ? new Redis(TEST_REDIS_URL!, { maxRetriesPerRequest: 2 }) : undefined;
  const app = await buildApp({ config, db: database.db, listen: database.listen, secret: TEST_SECRET, ...(redis ? { redis } : {}) });
  await options.beforeListen?.(app);
  await app.listen({ port, host: "127.0.0.1" });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await closeListening(app);
    redis?.disconnect();
    if (ownDatabase) await database.close();
  };
  t.teardown(close);
  return { app, url, database, redis, close };
}

/**
 * Closes an app that listens, as a test's teardown should. A client that left a response unread (a large page, a
 * stream it stopped following, a body it cancelled) holds its socket, and Fastify's close waits for it: up to its
 * 72 s keep-alive timeout (measured: 70 s for one file of the plugins area). A second's grace, then the remaining
 * sockets are cut, as a process exit would.
 */
export async function closeListening(app: FastifyInstance): Promise<void> {
  const cut = setTimeout(() => app.server.closeAllConnections(), 1_000);
  await app.close().finally(() => clearTimeout(cut));
}
