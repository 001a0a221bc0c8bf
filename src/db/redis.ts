import { Redis, type RedisOptions } from "ioredis";

/**
 * Every Redis connection Tether opens, with one set of options, so that Redis away or stalled means the
 * same everywhere: a command fails within 2 s (its caller answers 503 or reports), never hangs a request,
 * and the connection comes back by itself (retries every 0.1–1 s). `failFast` drops the offline queue:
 * while Redis is away a command fails at once instead of waiting up to the timeout, which the cluster
 * dispatcher needs (its calls fail `DISPATCH_UNAVAILABLE` at once, and its liveness notices Redis gone) and
 * a subscriber needs (it must not queue a SUBSCRIBE behind a dead socket).
 */
export const REDIS_OPTIONS = {
  maxRetriesPerRequest: 1,
  connectTimeout: 2_000,
  commandTimeout: 2_000,
  retryStrategy: (times: number) => Math.min(times * 100, 1_000),
} as const satisfies RedisOptions;

export function connectRedis(url: string, options: { failFast?: boolean } = {}): Redis {
  return new Redis(url, { ...REDIS_OPTIONS, ...(options.failFast ? { enableOfflineQueue: false } : {}) });
}
