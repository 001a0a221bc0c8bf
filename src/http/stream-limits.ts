import type { FastifyReply } from "fastify";
import fp from "fastify-plugin";
import type { Redis } from "ioredis";
import { HttpError } from "./errors.js";
import { createStreamAccounting, type Refusal, type StreamHolder, type StreamKind, type StreamLease } from "./stream-leases.js";

export type { StreamHolder, StreamKind, StreamLease } from "./stream-leases.js";

declare module "fastify" {
  interface FastifyInstance {
    /** The one admission for long-lived streams (see `streamLimitsPlugin`). */
    tetherStreams: StreamLimiter;
  }
}

export interface StreamLimiter {
  /**
   * A lease for a new long-lived stream of `holder`, to release when the stream ends; or a thrown
   * `HttpError`: 429 `TOO_MANY_STREAMS` past the user's or the credential's cap, 503
   * `STREAMS_AT_CAPACITY` when streams hold all the connections they may. A refusal sets `Retry-After`,
   * and `Connection: close` so that being refused costs the client its connection, not the server.
   */
  admit(reply: FastifyReply, holder: StreamHolder): Promise<StreamLease>;
  /** Long-lived streams this process holds now. */
  readonly held: number;
}

export interface StreamLimitsOptions {
  /** Streams of one kind one user may hold at once, across replicas with `redis` (default 64; 0: no limit). */
  perUser?: number;
  /** Streams one credential may hold at once (default 16; 0: no limit). */
  perCredential?: number;
  /**
   * Connections streams leave to everything else: streams of every kind together hold at most the
   * server's `maxConnections` minus this (default a tenth of it; no bound when `maxConnections` is unset).
   */
  reservedConnections?: number;
  /** Shares the per-user and per-credential counts with every replica on this Redis. */
  redis?: Redis;
  /** Redis key prefix (default `tether:streams:`). */
  prefix?: string;
  /** A crashed replica's streams stop counting within this (default 30 s); also the refusals' `Retry-After`. */
  leaseSeconds?: number;
}

/** How a refusal names the streams of each kind, and the credential that opened them. */
const WORDS: Record<StreamKind, { streams: string; credential: string }> = {
  device: { streams: "device streams", credential: "This device" },
  "live-view": { streams: "live /devices pages", credential: "This browser session" },
  mcp: { streams: "MCP notification streams", credential: "This token" },
};

/** How often a Redis outage is logged, at most: admissions during one would otherwise log each. */
const REDIS_LOG_INTERVAL_MS = 10_000;

/**
 * Admission for every long-lived stream the app serves (device streams, `/devices` live views, MCP
 * notification streams): per-user and per-credential caps, shared across replicas through Redis when
 * given, and a bound on all streams together that keeps connections free for ordinary requests and
 * health checks. Register it before the plugins that serve streams; they declare it.
 */
export const streamLimitsPlugin = fp<StreamLimitsOptions>(
  async (fastify, options) => {
    const perUser = options.perUser ?? 64;
    const perCredential = options.perCredential ?? 16;
    const leaseSeconds = options.leaseSeconds ?? 30;
    const capacity = () => {
      const max = fastify.server.maxConnections;
      if (typeof max !== "number" || !Number.isFinite(max) || max <= 0) return Infinity;
      return Math.max(0, max - (options.reservedConnections ?? Math.ceil(max / 10)));
    };
    let lastRedisLog = 0;
    const accounting = createStreamAccounting({
      perUser,
      perCredential,
      capacity,
      leaseMs: leaseSeconds * 1000,
      ...(options.redis ? { redis: options.redis } : {}),
      ...(options.prefix ? { prefix: options.prefix } : {}),
      onRedisError: (error) => {
        if (Date.now() - lastRedisLog < REDIS_LOG_INTERVAL_MS) return;
        lastRedisLog = Date.now();
        fastify.log.warn({ err: error }, "streams: Redis unreachable; each replica caps its own streams until it is back");
      },
    });
    fastify.addHook("onClose", async () => accounting.close());

    const refusal = (reason: Refusal, holder: StreamHolder): HttpError => {
      if (reason === "capacity") {
        return new HttpError(503, "STREAMS_AT_CAPACITY", `The server holds as many long-lived streams as it can; try again in ${leaseSeconds} s`);
      }
      const words = WORDS[holder.kind];
      const [who, cap] = reason === "user" ? ["Your account", perUser] : [words.credential, perCredential];
      return new HttpError(429, "TOO_MANY_STREAMS", `${who} already has ${cap} ${words.streams} open; close one, or try again later`);
    };

    fastify.decorate("tetherStreams", {
      get held() {
        return accounting.held;
      },
      async admit(reply, holder) {
        const outcome = await accounting.acquire(holder);
        if (typeof outcome !== "string") return outcome;
        reply.header("retry-after", String(leaseSeconds)).header("connection", "close");
        throw refusal(outcome, holder);
      },
    } satisfies StreamLimiter);
  },
  { name: "tether-streams", fastify: "5.x", dependencies: ["tether-errors"] },
);
