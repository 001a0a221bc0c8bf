import { ConfigError, loadConfig } from "../config/env.js";
import { DatabaseBusyError } from "../db/pglite-lock.js";
import { openRuntime } from "../runtime.js";

/** `npm run migrate`: brings the configured database up to date (the server also does this at start-up). */
try {
  const runtime = await openRuntime(loadConfig(), { migrate: true });
  await runtime.close();
  console.log("Database is up to date.");
} catch (error) {
  console.error(error instanceof ConfigError || error instanceof DatabaseBusyError ? error.message : error);
  process.exitCode = 1;
}
