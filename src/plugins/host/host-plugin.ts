import path from "node:path";
import fp from "fastify-plugin";
import { onUserChanged } from "../auth/user-changes.js";
import { deviceRoutes } from "./device-routes.js";
import { downloadRoutes } from "./download-routes.js";
import { downloadCatalog, type DownloadCatalog } from "./downloads.js";
import { createMemoryDispatcher, type Dispatcher } from "./dispatcher.js";
import { createRateLimiter } from "./rate-limit.js";
import { createHostService, type HostService } from "./service.js";
import { userRoutes } from "./user-routes.js";

declare module "fastify" {
  interface FastifyInstance {
    /** The device host connector: pairing, devices, calls and proposals (see service.ts). */
    tetherHost: HostService;
    /** The device executables this server offers (`/downloads`, and the update notice). */
    tetherHostDownloads: DownloadCatalog;
  }
}

export interface HostPluginOptions {
  /** Another dispatcher backend; defaults to the in-memory one (single replica). */
  dispatcher?: Dispatcher;
  /** Keep-alive comment interval on device streams (default 15 s). */
  keepAliveMs?: number;
  /** Default wait for a call's result (default 30 s); a call may ask for up to 10 min. */
  callTimeoutMs?: number;
  /** Wait for an approved change to be applied (default 120 s). */
  applyTimeoutMs?: number;
  /**
   * Failed enrollment attempts per client address (`request.ip`, so set `trustProxy` behind a proxy)
   * per window; default 10 a minute, after which the address is refused until the window ends. Kept
   * in this process's memory, like the dispatcher.
   */
  enrollRateLimit?: { max: number; windowMs: number };
  /** Where the executables offered at `/downloads` are (what `npm run build:host` writes; default `dist/downloads`). */
  downloadsDir?: string;
}

/**
 * The device host connector on Fastify. Decorates `fastify.tetherHost` and serves `/api/host/*`: the
 * owner's JSON API (session or `host:call` token) and the device's API (device token). The consuming
 * app owns the tables (migrations/0004_host.ts). Streams are closed before the server stops, so a
 * restart never waits on them and devices reconnect to the next instance.
 */
export const hostPlugin = fp<HostPluginOptions>(
  async (fastify, options) => {
    const dispatcher = options.dispatcher ?? createMemoryDispatcher({ defaultTimeoutMs: options.callTimeoutMs ?? 30_000 });
    const service = createHostService({
      db: fastify.tetherDb,
      dispatcher,
      ...(options.applyTimeoutMs !== undefined ? { applyTimeoutMs: options.applyTimeoutMs } : {}),
      onBackgroundError: (error) => fastify.log.warn({ err: error }, "host background write failed"),
    });
    fastify.decorate("tetherHost", service);
    // An admin deactivating or deleting a user closes that user's device streams at once.
    const stopWatchingUsers = onUserChanged(fastify.tetherAuth, (userId) => {
      service.ownerChanged(userId).catch((error: unknown) => fastify.log.warn({ err: error }, "host: owner re-check failed"));
    });
    fastify.addHook("preClose", async () => {
      stopWatchingUsers();
      dispatcher.closeAll();
    });

    const catalog = downloadCatalog(path.resolve(options.downloadsDir ?? "dist/downloads"));
    fastify.decorate("tetherHostDownloads", catalog);
    await fastify.register(downloadRoutes, { catalog });

    const limit = options.enrollRateLimit ?? { max: 10, windowMs: 60_000 };
    await fastify.register(deviceRoutes, {
      enrollLimiter: createRateLimiter(limit),
      keepAliveMs: options.keepAliveMs ?? 15_000,
      offeredHostVersion: () => catalog.version(),
    });
    await fastify.register(userRoutes);
  },
  { name: "tether-host", dependencies: ["tether-db", "tether-auth", "tether-session", "tether-errors", "tether-origin-guard"] },
);
