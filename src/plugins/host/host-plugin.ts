import path from "node:path";
import fp from "fastify-plugin";
import type { FastifyInstance } from "fastify";
import { onUserChanged } from "../auth/user-changes.js";
import { DeviceCache, HOST_INVALIDATION_CHANNEL } from "./device-cache.js";
import { deviceRoutes } from "./device-routes.js";
import { downloadRoutes } from "./download-routes.js";
import { downloadCatalog, type DownloadCatalog } from "./downloads.js";
import type { Dispatcher } from "./dispatcher.js";
import { createMemoryDispatcher } from "./memory-dispatcher.js";
import { createRedisCounterStore } from "../../db/counter-store.js";
import { connectRedis } from "../../db/redis.js";
import { createRateLimiter, type RateLimiter } from "./rate-limit.js";
import { createRedisDispatcher } from "./redis-dispatcher.js";
import type { PendingLimits } from "./proposals.js";
import { deviceTokenGrant } from "./token-device-grant.js";
import { createHostService, type Caller, type HostService } from "./service.js";
import * as audit from "./audit.js";
import { blobsForInput, deviceFetcher, withBlobHandle } from "./blobs/device-blobs.js";
import { userRoutes } from "./user-routes.js";

declare module "fastify" {
  interface FastifyInstance {
    /** The device host connector: pairing, devices, calls and proposals (see service.ts). */
    tetherHost: HostService;
    /** The device executables this server offers (`/downloads`, and the update notice). */
    tetherHostDownloads: DownloadCatalog;
    /** The oldest tether-host this server supports (`minimumHostVersion`); older devices show as outdated. */
    tetherHostMinimumVersion: string | undefined;
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
  /** Proposals waiting at once, per user and per device (default 50 and 20): 429 TOO_MANY_PENDING beyond. */
  pendingLimits?: PendingLimits;
  /** How long a decided or expired proposal keeps its diff, input and result (default 7 days). */
  proposalRetentionMs?: number;
  /**
   * How often this replica sweeps proposals (expires the stale, purges past the retention; default
   * 5 minutes, and once at start). Every replica may sweep: the sweep is idempotent.
   */
  proposalSweepIntervalMs?: number;
  /** The oldest tether-host version supported (`1.2.0`): devices are told at hello, and /devices marks older ones outdated. */
  minimumHostVersion?: string;
}

/**
 * The device host connector on Fastify. Decorates `fastify.tetherHost` and serves `/api/host/*`: the
 * owner's JSON API (session or `host:call` token) and the device's API (device token). The consuming
 * app owns the tables (migrations/0004_host.ts, 0030_host_invalidation.ts). Streams are closed before
 * the server stops, so a restart never waits on them and devices reconnect to the next instance.
 */
export const hostPlugin = fp<HostPluginOptions>(
  async (fastify, options) => {
    if (options.minimumHostVersion !== undefined && !/^\d+\.\d+\.\d+$/.test(options.minimumHostVersion)) {
      throw new Error(`hostPlugin: minimumHostVersion "${options.minimumHostVersion}" is not a version like 1.2.0`);
    }
    const defaultTimeoutMs = options.callTimeoutMs ?? 30_000;
    const prefix = options.redis?.prefix ?? "tether:host:";
    const onError = (error: unknown) => fastify.log.warn({ err: error }, "host dispatcher (Redis)");
    const shared = !options.dispatcher && options.redis ? createRedisDispatcher({ url: options.redis.url, prefix, defaultTimeoutMs, onError }) : undefined;
    if (shared) fastify.log.info({ replica: shared.replicaId }, "host: one of several replicas, dispatching through Redis");
    const dispatcher = options.dispatcher ?? shared ?? createMemoryDispatcher({ defaultTimeoutMs });
    const limit = options.enrollRateLimit ?? { max: 10, windowMs: 60_000 };
    // Enrollments count on the dispatcher's command connection (no offline queue: with Redis away an enrollment
    // fails at once, 503); only a dispatcher of another kind beside `redis` leaves the limit a connection of its own.
    const limiterRedis = options.redis && !shared ? connectRedis(options.redis.url, { failFast: true }) : undefined;
    limiterRedis?.on("error", () => {}); // Redis being away is reported by the requests it fails (503)
    const counterRedis = shared?.commands ?? limiterRedis;
    const enrollLimiter: RateLimiter = createRateLimiter(
      limit,
      counterRedis ? createRedisCounterStore(counterRedis, { prefix: `${prefix}enroll:` }) : undefined,
    );
    const cache = fastify.tetherDbListen ? new DeviceCache() : undefined;
    // Blobs are optional: with `blobPlugin` registered first, large and binary reads get handles.
    const blobs = fastify.hasDecorator("tetherBlobs") ? fastify.tetherBlobs : undefined;
    const service = createHostService({
      db: fastify.tetherDb,
      dispatcher,
      audit: fastify.tetherAudit,
      ...(cache ? { cache } : {}),
      ...(options.applyTimeoutMs !== undefined ? { applyTimeoutMs: options.applyTimeoutMs } : {}),
      ...(options.pendingLimits ? { pendingLimits: options.pendingLimits } : {}),
      ...(options.proposalRetentionMs !== undefined ? { proposalRetentionMs: options.proposalRetentionMs } : {}),
      onBackgroundError: (error) => fastify.log.warn({ err: error }, "host background write failed"),
      ...(blobs
        ? {
            onReadResult: (caller: Caller, deviceId: string, result: unknown) =>
              withBlobHandle(blobs, caller, deviceId, result, (entry) => audit.record(fastify.tetherAudit, entry)),
          }
        : {}),
      ...(blobs ? { blobsFor: (userId: string, input: unknown) => blobsForInput(blobs, userId, input) } : {}),
      ...(blobs ? { onRevoked: (deviceId: string) => blobs.deleteForDevice(deviceId) } : {}),
    });
    // A device blob's bytes are fetched from its device when its URL is first used.
    blobs?.setDeviceFetcher(deviceFetcher(blobs, dispatcher));
    fastify.decorate("tetherHost", service);
    // API tokens can be limited to chosen devices: the session plugin's token service asks this plugin.
    fastify.tetherApiTokens.grants.add(deviceTokenGrant(fastify.tetherDb, service));

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
    scheduleProposalSweep(fastify, service, options.proposalSweepIntervalMs ?? 5 * 60_000);
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
    fastify.decorate("tetherHostMinimumVersion", options.minimumHostVersion);
    await fastify.register(downloadRoutes, { catalog });
    await fastify.register(deviceRoutes, {
      enrollLimiter,
      keepAliveMs: options.keepAliveMs ?? 15_000,
      offeredHostVersion: () => catalog.version(),
      ...(options.minimumHostVersion ? { minimumHostVersion: options.minimumHostVersion } : {}),
    });
    await fastify.register(userRoutes);
  },
  {
    name: "tether-host",
    fastify: "5.x",
    dependencies: ["tether-db", "tether-audit", "tether-auth", "tether-session", "tether-errors", "tether-origin-guard", "tether-streams"],
  },
);

/**
 * The proposal sweep (expiry and retention): once at start, then every `intervalMs`; a failure (the database
 * away) is logged and waits for the next. The server stops only after a sweep under way is done.
 */
function scheduleProposalSweep(fastify: FastifyInstance, service: HostService, intervalMs: number): void {
  let sweeping: Promise<unknown> = Promise.resolve();
  const sweep = () => {
    sweeping = service.sweepProposals().catch((error: unknown) => fastify.log.warn({ err: error }, "host: proposal sweep failed"));
  };
  let sweepTimer: NodeJS.Timeout | undefined;
  fastify.addHook("onReady", async () => {
    // The first sweep is done before the server is ready: its writes never land inside the first requests
    // (it never throws: a failure is logged and waits for the next).
    sweep();
    await sweeping;
    sweepTimer = setInterval(sweep, intervalMs);
    sweepTimer.unref();
  });
  fastify.addHook("preClose", async () => {
    clearInterval(sweepTimer);
    await sweeping;
  });
}
