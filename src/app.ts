import { readFileSync } from "node:fs";
import cookie from "@fastify/cookie";
import formbody from "@fastify/formbody";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import Fastify, { type FastifyBaseLogger, type FastifyServerOptions } from "fastify";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";
import type { AppConfig } from "./config/env.js";
import { dbPlugin } from "./db/db-plugin.js";
import type { NotificationSource } from "./db/notifications.js";
import type { Database } from "./db/schema.js";
import { errorHandlerPlugin, frameworkErrorHandler } from "./http/error-handler.js";
import { auditPlugin, createAuditWriter } from "./plugins/activity/audit-plugin.js";
import { activityPlugin } from "./plugins/activity/activity-plugin.js";
import { createActivityWriter } from "./plugins/activity/writer.js";
import { inputGuardPlugin } from "./http/input-guard.js";
import { withLogRedaction } from "./http/log-redaction.js";
import { routeInventoryPlugin } from "./http/route-inventory.js";
import { fairSharePlugin } from "./http/fair-share.js";
import { streamLimitsPlugin } from "./http/stream-limits.js";
import { trustedOriginList } from "./http/origins.js";
import { authPlugin } from "./plugins/auth/auth-plugin.js";
import { createAuth, type ResetPasswordMessage } from "./plugins/auth/create-auth.js";
import { edgeSso } from "./plugins/auth/edge-sso.js";
import { originGuardPlugin } from "./plugins/auth/origin-guard.js";
import { hostDeviceAuthorization } from "./plugins/host/device-grant.js";
import { hostPlugin } from "./plugins/host/host-plugin.js";
import { blobPlugin } from "./plugins/host/blobs/blob-plugin.js";
import { createS3BlobStore } from "./plugins/host/blobs/s3-store.js";
import { createRateLimiter } from "./plugins/host/rate-limit.js";
import { createRedisCounterStore } from "./db/counter-store.js";
import { mcpPlugin } from "./plugins/mcp/mcp-plugin.js";
import { mcpOAuthPlugins } from "./plugins/mcp/oauth.js";
import { mcpPages, mcpPublicPages } from "./plugins/mcp/pages.js";
import { sessionPlugin } from "./plugins/session/session-plugin.js";
import { apiTokenRoutes } from "./plugins/session/token-routes.js";
import { adminApiRoutes } from "./app/routes/admin-api.js";
import { healthRoutes } from "./app/routes/health.js";
import { meRoutes } from "./app/routes/me.js";
import {
  activityPages,
  adminPages,
  devicePages,
  guardedPagesPlugin,
  homePage,
  pagesPlugin,
  securityPages,
  sessionPages,
  tokenPages,
  type GuardedPagePlugin,
} from "./web/index.js";
import { deviceApprovalPage } from "./web/routes/device-approval-page.js";
import { canonicalAddressPlugin } from "./web/canonical-address.js";
import { navCounts } from "./web/routes/home-page.js";

export interface BuildAppOptions {
  config: AppConfig;
  db: Kysely<Database>;
  /** LISTEN on the database (`DatabaseHandle.listen`): turns on the invalidated session cache. */
  listen?: NotificationSource;
  /** better-auth's secret (from the environment, or generated once into the data directory). */
  secret: string;
  /** Shared store for rate-limit counters across instances (sessions stay in the database). */
  redis?: Redis;
  logger?: FastifyServerOptions["logger"];
  /** Further signed-in pages; each inherits the route guard (see src/web/guard.ts). */
  guardedPages?: GuardedPagePlugin[];
}

/**
 * The example app: Tether's plugins registered the way a consuming team registers them in its own
 * Fastify app. The caller owns the database and Redis connections and closes them.
 */
export async function buildApp(options: BuildAppOptions) {
  const { config } = options;
  const { limits } = config;
  const app = createServer(options);

  // One audit writer for the app, made before Fastify's plugins because better-auth's hooks (created
  // next) record sign-in events through it; the audit plugin decorates and closes this same writer.
  const auditRows = createAuditWriter(options.db, { onError: (error) => app.log.error({ err: error }, "audit log write failed (will retry)") });
  const activity = createActivityWriter(auditRows);
  const auth = createAppAuth(options, app.log, activity);

  await app.register(routeInventoryPlugin);
  await app.register(inputGuardPlugin);
  await app.register(errorHandlerPlugin);
  await app.register(cookie);
  await app.register(formbody);
  await app.register(dbPlugin, { db: options.db, ...(options.listen ? { listen: options.listen } : {}) });
  await app.register(auditPlugin, { writer: auditRows });
  // Development: a page opened at another name of this machine (127.0.0.1 for localhost) moves to the
  // configured address before it shows a form the origin guard would refuse.
  if (!config.production) await app.register(canonicalAddressPlugin, { baseURL: config.baseURL });
  await app.register(originGuardPlugin, { trustedOrigins: trustedOriginList(config.baseURL, config.trustedOrigins) });
  await app.register(authPlugin, { auth, edgeSsoEnabled: config.edgeSso !== undefined });
  await app.register(sessionPlugin);
  // A fair share of this process for every user: a few of one user's requests at once, the rest wait.
  await app.register(fairSharePlugin, { perCredential: limits.concurrentRequestsPerCredential, streamPaths: ["/mcp", "/devices/events", "/api/host/stream"] });
  await app.register(activityPlugin, { writer: activity });
  await app.register(apiTokenRoutes);
  // Every long-lived stream (device streams, /devices live views, MCP streams) is admitted here: caps per
  // user and per credential (shared through Redis), and room kept for ordinary requests and /healthz.
  await app.register(streamLimitsPlugin, {
    perUser: limits.streamsPerUser,
    perCredential: limits.streamsPerCredential,
    reservedConnections: limits.streamReservedConnections,
    leaseSeconds: limits.streamLeaseSeconds,
    ...(options.redis ? { redis: options.redis } : {}),
  });
  // Blobs before the host, which gives large and binary reads a handle (docs/blobs.md).
  await app.register(blobPlugin, {
    dir: config.blobs.dir,
    ...(config.blobs.s3 ? { store: createS3BlobStore(config.blobs.s3) } : {}),
    secret: options.secret,
    retentionMs: config.blobs.retentionMs,
    quotaBytes: config.blobs.quotaBytes,
    urlTtlMs: config.blobs.urlTtlMs,
  });
  // With REDIS_URL the app runs as one of several replicas: see README "Running several replicas".
  await app.register(hostPlugin, {
    downloadsDir: config.downloadsDir,
    pendingLimits: { perUser: config.proposals.maxPendingPerUser, perDevice: config.proposals.maxPendingPerDevice },
    proposalRetentionMs: config.proposals.retentionMs,
    ...(config.minHostVersion ? { minimumHostVersion: config.minHostVersion } : {}),
    ...(config.redisURL ? { redis: { url: config.redisURL } } : {}),
  });
  const mcpRateLimiter = mcpRateLimiterFor(config, options.redis);
  await app.register(mcpPlugin, mcpRateLimiter ? { rateLimiter: mcpRateLimiter } : {});
  await app.register(meRoutes);
  await app.register(adminApiRoutes, { prefix: "/api/admin" });
  await app.register(healthRoutes);
  await app.register(pagesPlugin);
  await app.register(mcpPublicPages);
  // The app names its signed-in pages; each inherits the route guard.
  const pages: GuardedPagePlugin[] = [
    navCounts,
    homePage,
    tokenPages,
    adminPages,
    securityPages,
    sessionPages,
    activityPages,
    devicePages,
    deviceApprovalPage(options.redis ? { redis: options.redis } : {}),
    mcpPages,
    ...(options.guardedPages ?? []),
  ];
  await app.register(guardedPagesPlugin, { pages });
  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;

/** The Fastify instance, with the limits that protect it from slow or numerous clients. */
function createServer(options: BuildAppOptions) {
  const { config } = options;
  const { limits } = config;
  const app = Fastify({
    // Secrets (reset tokens, codes, credentials) never reach the log: see src/http/log-redaction.ts.
    logger: withLogRedaction(options.logger),
    // Slow clients: a request must arrive in full within requestTimeout (headers within
    // headersTimeout), checked every second rather than Node's 30 s; idle sockets and keep-alive
    // connections close. Event streams (hijacked replies) exempt themselves (sse-channel.ts).
    requestTimeout: limits.requestTimeoutMs,
    connectionTimeout: limits.connectionTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    maxRequestsPerSocket: limits.maxRequestsPerSocket,
    http: {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
    },
    // A hop count is valid at run time (proxy-addr) though Fastify's types omit it.
    trustProxy: config.trustProxy as FastifyServerOptions["trustProxy"],
    bodyLimit: 1024 * 1024,
    // A wrong type is an error the caller should hear about, not something to coerce ("1" for 1).
    ajv: { customOptions: { coerceTypes: false } },
    frameworkErrors: frameworkErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>();
  if (limits.maxConnections > 0) app.server.maxConnections = limits.maxConnections;
  return app;
}

/** better-auth as the app configures it: its plugins (edge SSO, the device grant, MCP's OAuth) and where its events and mail go. */
function createAppAuth(options: BuildAppOptions, log: FastifyBaseLogger, activity: ReturnType<typeof createActivityWriter>) {
  const { config } = options;
  return createAuth({
    db: options.db,
    baseURL: config.baseURL,
    secret: options.secret,
    trustedOrigins: config.trustedOrigins,
    rateLimit: config.production,
    ...(options.redis ? { counters: createRedisCounterStore(options.redis, { prefix: "tether:" }) } : {}),
    sendResetPassword: (message: ResetPasswordMessage) => {
      // Without a mail service the link goes to the log, and only outside production.
      if (!config.production) log.info({ email: message.user.email, url: message.url }, "password reset link");
    },
    passkeys: config.passkeysEnabled,
    signInLockout: config.signInLockout,
    recordActivity: activity.record,
    plugins: [
      ...(config.edgeSso ? [edgeSso(config.edgeSso)] : []),
      ...hostDeviceAuthorization({
        db: options.db,
        verificationUri: `${config.baseURL}/device`,
        expiresIn: config.deviceCodeExpiresIn,
        interval: config.devicePollInterval,
      }),
      ...mcpOAuthPlugins({
        resourceURL: `${config.baseURL}/mcp`,
        recordActivity: activity.record,
        clientIdMetadataDocuments: config.cimd.enabled && {
          allowHosts: config.cimd.allowHosts,
          ...(config.cimd.caFile ? { ca: readFileSync(config.cimd.caFile, "utf8") } : {}),
        },
      }),
    ],
  });
}

/** Per credential in production, like the auth API's limits; shared by every replica with Redis. */
function mcpRateLimiterFor(config: AppConfig, redis: Redis | undefined) {
  const mcpLimit = { max: config.mcpRateLimit.max, windowMs: config.mcpRateLimit.windowSeconds * 1000 };
  if (!config.production || mcpLimit.max <= 0) return undefined;
  return createRateLimiter(mcpLimit, redis ? createRedisCounterStore(redis, { prefix: "tether:mcp:rate:" }) : undefined);
}
