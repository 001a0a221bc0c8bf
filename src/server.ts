import { buildApp } from "./app.js";
import { ConfigError, loadConfig } from "./config/env.js";
import { DatabaseBusyError } from "./db/pglite-lock.js";
import { prepareHostExecutable } from "./plugins/host/host-build.js";
import { openRuntime } from "./runtime.js";

async function main(): Promise<void> {
  const config = loadConfig();
  const runtime = await openRuntime(config, { migrate: true });
  const app = await buildApp({
    config,
    db: runtime.database.db,
    listen: runtime.database.listen,
    secret: runtime.secret,
    ...(runtime.redis ? { redis: runtime.redis } : {}),
    logger: { level: process.env.LOG_LEVEL ?? "info" },
  });
  // Outages are logged, never fatal: the pool replaces lost connections, ioredis reconnects.
  runtime.database.onConnectionError((error) => app.log.warn({ reason: error.message }, "database: a connection was lost"));
  runtime.redis?.on("error", (error: Error) => app.log.warn({ reason: error.message }, "redis: connection error"));

  let closing = false;
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      if (closing) return;
      closing = true;
      app.log.info(`${signal}: shutting down`);
      // The runtime (database, Redis) closes after the app: the app's last writes (audit) need it.
      app
        .close()
        .then(() => runtime.close())
        .then(
          () => process.exit(0),
          () => process.exit(1),
        );
    });
  }
  // Fastify would print the socket's address first ("http://127.0.0.1:3000"), which is not the site's
  // address when BETTER_AUTH_URL names another host: say both, the one to open first.
  // Development: a tether-host for this machine, built in the background when none is offered yet, or the one
  // offered was built from other sources than this checkout has (after a pull).
  const hostBuild = config.hostBuildOnStart
    ? await prepareHostExecutable({ downloadsDir: config.downloadsDir, log: app.log, production: config.production }).catch(() => undefined)
    : undefined;
  app.addHook("onClose", async () => {
    const builder = hostBuild?.child;
    if (builder?.pid !== undefined && builder.exitCode === null && builder.signalCode === null) builder.kill("SIGTERM");
  });
  await app.listen({ port: config.port, host: config.host, listenTextResolver: (address) => `Tether on ${config.baseURL} (listening on ${address})` });
  const database = runtime.database.kind === "postgres" ? "PostgreSQL" : `embedded, ${config.dataDir}`;
  app.log.info(`Open ${config.baseURL} in a browser (database: ${database})`);
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof DatabaseBusyError) {
    console.error(error.message);
  } else {
    console.error(error);
  }
  process.exit(1);
});
