import type { AppConfig } from "./config/env.js";
import { loadOrCreateSecret } from "./config/secret.js";
import { openDatabase, type DatabaseHandle } from "./db/connect.js";
import { migrateToLatest } from "./db/migrate.js";
import { acquirePgliteLock, type PgliteLock } from "./db/pglite-lock.js";
import type { Redis } from "ioredis";
import { connectRedis } from "./db/redis.js";
import { allMigrations } from "../migrations/index.js";

export interface Runtime {
  database: DatabaseHandle;
  secret: string;
  redis: Redis | undefined;
  close(): Promise<void>;
}

/**
 * Opens what the configuration names: PostgreSQL or the embedded database (locked to this process),
 * Redis when configured, the auth secret. Used by the server and the admin and migrate commands.
 */
export async function openRuntime(config: AppConfig, options: { migrate: boolean }): Promise<Runtime> {
  let lock: PgliteLock | undefined;
  if (!config.databaseURL) lock = await acquirePgliteLock(await ensureDir(config.dataDir));
  try {
    const database = await openDatabase(config.databaseURL ? { kind: "postgres", url: config.databaseURL } : { kind: "pglite", dataDir: config.dataDir });
    if (options.migrate) await migrateToLatest(database.db, allMigrations);
    const secret = config.secret ?? (await loadOrCreateSecret(config.dataDir));
    // A Redis that is down or stalled fails a command within 2 s (answered 503), never hangs a request.
    const redis = config.redisURL ? connectRedis(config.redisURL) : undefined;
    return {
      database,
      secret,
      redis,
      async close() {
        redis?.disconnect();
        await database.close();
        await lock?.release();
      },
    };
  } catch (error) {
    await lock?.release();
    throw error;
  }
}

async function ensureDir(dir: string): Promise<string> {
  const { mkdir } = await import("node:fs/promises");
  await mkdir(dir, { recursive: true });
  return dir;
}
