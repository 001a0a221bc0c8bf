import path from "node:path";
import fp from "fastify-plugin";
import { Redis } from "ioredis";
import { onUserChanged } from "../auth/user-changes.js";
import { DeviceCache, HOST_INVALIDATION_CHANNEL } from "./device-cache.js";
import { deviceRoutes } from "./device-routes.js";
import { downloadRoutes } from "./download-routes.js";
import { downloadCatalog, type DownloadCatalog } from "./downloads.js";
import { createMemoryDispatcher, type Dispatcher } from "./dispatcher.js";
import { createRateLimiter, createRedisRateLimiter, type RateLimiter } from "./rate-limit.js";
import { createRedisDispatcher } from "./redis-dispatcher.js";
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
  /**
   * Run as one of several replicas: the dispatcher (calls, results, presence, revocations) and the
   * enrollment rate limit are shared through this Redis (the example app passes REDIS_URL). Without
   * it, one replica: both live in this process's memory.
   */
  redis?: { url: string; prefix?: string };
  /** Another dispatcher backend (overrides `redis`); the plugin closes it. */
  dispatcher?: Dispatcher;
  /** Keep-alive comment interval on device streams (default 15 s). */
  keepAliveMs?: number;
  /** Default wait for a call's result (default 30 s); a call may ask for up to 10 min. */
  callTimeoutMs?: number;
  /** Wait for an approved change to be applied (default 120 s). */
  applyTimeoutMs?: number;
  /**
   * Failed enrollment attempts per client address (`request.ip`, so set `trustProxy` behind a proxy)
   * per window; default 10 a minute, after which the address is refused until the window ends.
   */
  enrollRateLimit?: { max: number; windowMs: number };
  /** Where the executables offered at `/downloads` are (what `npm run build:host` writes; default `dist/downloads`). */
  downloadsDir?: string;
}

/**
 * The device host connector on Fastify. Decorates `fastify.tetherHost` and serves `/api/host/*`: the
 * owner's JSON API (session or `host:call` token) and the device's API (device token). The consuming
 * app owns the tables (migrations/0004_host.ts, 0030_host_invalidation.ts). Streams are closed before
 * the server stops, so a restart never waits on them and devices reconnect to the next instance.
 */
export const hostPlugin = fp<HostPluginOptions>(
  async (fastify, options) => {
    const defaultTimeoutMs = options.callTimeoutMs ?? 30_000;
    const prefix = options.redis?.prefix ?? "tether:host:";
    const onError = (error: unknown) => fastify.log.warn({ err: error }, "host dispatcher (Redis)");
    const shared = !options.dispatcher && options.redis ? createRedisDispatcher({ url: options.redis.url, prefix, defaultTimeoutMs, onError }) : undefined;
    if (shared) fastify.log.info({ replica: shared.replicaId }, "host: one of several replicas, dispatching through Redis");
    const dispatcher = options.dispatcher ?? shared ?? createMemoryDispatcher({ defaultTimeoutMs });
    const limit = options.enrollRateLimit ?? { max: 10, windowMs: 60_000 };
    // Its own connection, without an offline queue: with Redis away an enrollment fails at once (503).
    const limiterRedis = options.redis ? new Redis(options.redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 }) : undefined;
    limiterRedis?.on("error", () => {}); // reported by the dispatcher's connections already
    const enrollLimiter: RateLimiter = limiterRedis ? createRedisRateLimiter(limiterRedis, { ...limit, prefix: `${prefix}enroll:` }) : createRateLimiter(limit);
    const cache = fastify.tetherDbListen ? new DeviceCache() : undefined;
    const service = createHostService({
      db: fastify.tetherDb,
      dispatcher,
      audit: fastify.tetherAudit,
      ...(cache ? { cache } : {}),
      ...(options.applyTimeoutMs !== undefined ? { applyTimeoutMs: options.applyTimeoutMs } : {}),
      onBackgroundError: (error) => fastify.log.warn({ err: error }, "host background write failed"),
    });
    fastify.decorate("tetherHost", service);

    const ownerChanged = (userId: string) => {
      service.ownerChanged(userId).catch((error: unknown) => fastify.log.warn({ err: error }, "host: owner re-check failed"));
    };
    // An admin deactivating or deleting a user in this process closes that user's device streams at once.
    const stopWatchingUsers = onUserChanged(fastify.tetherAuth, ownerChanged);
    // Every replica hears every revoke and owner change from the database (whoever made it, even plain
    // SQL): cached credentials are dropped, and a deactivated owner's streams held here are closed.
    const subscription = cache
      ? await fastify.tetherDbListen!(HOST_INVALIDATION_CHANNEL, {
          onMessage: (payload) => {
            cache.invalidate(payload);
            if (payload.startsWith("u:")) ownerChanged(payload.slice(2));
          },
          onReady: (proofBoundMs) => cache.resume(proofBoundMs),
          onProven: (sentAt) => cache.prove(sentAt),
          onLost: () => cache.suspend(),
        })
      : undefined;
    fastify.addHook("preClose", async () => {
      stopWatchingUsers();
      await dispatcher.closeAll();
    });
    fastify.addHook("onClose", async () => {
      cache?.suspend();
      limiterRedis?.disconnect();
      await subscription?.close();
    });

    const catalog = downloadCatalog(path.resolve(options.downloadsDir ?? "dist/downloads"));
    fastify.decorate("tetherHostDownloads", catalog);
    await fastify.register(downloadRoutes, { catalog });
    await fastify.register(deviceRoutes, {
      enrollLimiter,
      keepAliveMs: options.keepAliveMs ?? 15_000,
      offeredHostVersion: () => catalog.version(),
    });
    await fastify.register(userRoutes);
  },
  {
    name: "tether-host",
    fastify: "5.x",
    dependencies: ["tether-db", "tether-audit", "tether-auth", "tether-session", "tether-errors", "tether-origin-guard"],
  },
);
