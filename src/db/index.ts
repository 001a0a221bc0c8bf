/**
 * `tether/db`: the database the plugins share: opening PostgreSQL or PGlite, the `tether-db` plugin
 * (`fastify.tetherDb`, and `tetherDbListen` for the invalidated session cache), the migrator and the
 * tables' types. Each plugin's migrations come from its own entry (`authMigrations` from `tether/auth`,
 * `hostMigrations` from `tether/host`).
 */
export { dbPlugin, type DbPluginOptions } from "./db-plugin.js";
export { openDatabase, type DatabaseHandle, type DatabaseTarget } from "./connect.js";
export { migrateToLatest, MigrationError } from "./migrate.js";
export type { Database } from "./schema.js";
export type { NotificationSource } from "./notifications.js";
export { allMigrations } from "../../migrations/index.js";
export { createMemoryCounterStore, createRedisCounterStore, type CounterStore } from "./counter-store.js";
export { connectRedis } from "./redis.js";
