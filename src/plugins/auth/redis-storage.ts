import type { BetterAuthRateLimitStorage } from "better-auth";
import type { Redis } from "ioredis";
import { HttpError } from "../../http/errors.js";

/**
 * better-auth's rate-limit counters in Redis, shared by every instance. Only counters live there:
 * sessions and users stay in the database alone (no `secondaryStorage`), so a change made straight in
 * the database (an admin's SQL deactivating a user or deleting sessions) applies to every path,
 * better-auth's own endpoints included, and a Redis outage can never keep a revoked session alive.
 *
 * With Redis unreachable a limit cannot be enforced, and rate limiting is never skipped silently:
 * the call answers 503 `RATE_LIMIT_UNAVAILABLE` (sign-out is not rate limited, so it always works).
 */
export function redisRateLimitStorage(redis: Redis, keyPrefix = "tether:"): BetterAuthRateLimitStorage {
  return {
    // INCR and EXPIRE NX in one round trip: the window starts with the first request and the counter
    // expires with it.
    async consume(key, rule) {
      let count: number;
      try {
        const result = await redis.multi().incr(keyPrefix + key).expire(keyPrefix + key, Math.ceil(rule.window), "NX").exec();
        const [error, value] = result?.[0] ?? [new Error("empty MULTI reply"), 0];
        if (error) throw error;
        count = Number(value);
      } catch (error) {
        throw new HttpError(503, "RATE_LIMIT_UNAVAILABLE", "Sign-in is unavailable for a moment (the rate limiter cannot be reached); try again shortly", { cause: error });
      }
      if (count <= rule.max) return { allowed: true, retryAfter: null };
      const ttl = await redis.ttl(keyPrefix + key).catch(() => rule.window);
      return { allowed: false, retryAfter: ttl > 0 ? ttl : rule.window };
    },
  };
}
