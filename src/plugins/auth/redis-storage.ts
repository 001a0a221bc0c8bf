import type { BetterAuthRateLimitStorage, SecondaryStorage } from "better-auth";
import type { Redis } from "ioredis";
import { HttpError } from "../../http/errors.js";

/**
 * Counters in Redis, shared by every instance: better-auth's per-IP rate limits and the per-account
 * sign-in lockout. Only counters live there. Sessions and users stay in the database alone (better-auth
 * gets no `secondaryStorage`), so a change made straight in the database (an admin's SQL deactivating
 * a user or deleting sessions) applies on every path, better-auth's own endpoints included, and a
 * Redis outage can never keep a revoked session alive.
 *
 * With Redis unreachable a limit cannot be enforced, and limits are never skipped silently: the call
 * answers 503 `RATE_LIMIT_UNAVAILABLE` within the client's command timeout. Sign-out is not rate
 * limited (create-auth.ts), so it needs no Redis and always works.
 */
export function redisRateLimitStorage(redis: Redis, keyPrefix = "tether:"): BetterAuthRateLimitStorage {
  const counters = redisCounterStorage(redis, keyPrefix);
  return {
    async consume(key, rule) {
      const count = await counters.increment!(key, rule.window);
      if (count <= rule.max) return { allowed: true, retryAfter: null };
      const ttl = await redis.ttl(keyPrefix + key).catch(() => rule.window);
      return { allowed: false, retryAfter: ttl > 0 ? ttl : rule.window };
    },
  };
}

/** Counters with a TTL as better-auth's `SecondaryStorage` (the shape the sign-in lockout takes). */
export function redisCounterStorage(redis: Redis, keyPrefix = "tether:"): SecondaryStorage {
  return {
    get: (key) => unavailableOnError(redis.get(keyPrefix + key)),
    getAndDelete: (key) => unavailableOnError(redis.getdel(keyPrefix + key)),
    async set(key, value, ttl) {
      if (ttl && ttl > 0) await unavailableOnError(redis.set(keyPrefix + key, value, "EX", Math.ceil(ttl)));
      else await unavailableOnError(redis.set(keyPrefix + key, value));
    },
    async delete(key) {
      await unavailableOnError(redis.del(keyPrefix + key));
    },
    // INCR and EXPIRE NX in one round trip: the window starts with the first count and ends with its TTL.
    async increment(key, ttl) {
      const result = await unavailableOnError(redis.multi().incr(keyPrefix + key).expire(keyPrefix + key, Math.ceil(ttl), "NX").exec());
      const [error, count] = result?.[0] ?? [new Error("empty MULTI reply"), 0];
      if (error) throw unavailable(error);
      return Number(count);
    },
  };
}

const unavailable = (cause: unknown) =>
  new HttpError(503, "RATE_LIMIT_UNAVAILABLE", "Signing in is unavailable for a moment (the rate limiter cannot be reached); try again shortly", { cause });

function unavailableOnError<T>(command: Promise<T>): Promise<T> {
  return command.catch((error: unknown) => {
    throw unavailable(error);
  });
}
