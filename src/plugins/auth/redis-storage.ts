import type { SecondaryStorage } from "better-auth";
import type { Redis } from "ioredis";

/**
 * better-auth's secondary storage over ioredis. (`@better-auth/redis-storage` pins ioredis 5 and
 * predates the atomic `increment` that rate limiting needs, so this is the short version of it.)
 */
export function redisSecondaryStorage(redis: Redis, keyPrefix = "tether:"): SecondaryStorage {
  return {
    get: (key) => redis.get(keyPrefix + key),
    getAndDelete: (key) => redis.getdel(keyPrefix + key),
    async set(key, value, ttl) {
      if (ttl && ttl > 0) await redis.set(keyPrefix + key, value, "EX", Math.ceil(ttl));
      else await redis.set(keyPrefix + key, value);
    },
    async delete(key) {
      await redis.del(keyPrefix + key);
    },
    // INCR and EXPIRE NX in one round trip: the TTL is set only when the counter is created.
    async increment(key, ttl) {
      const result = await redis.multi().incr(keyPrefix + key).expire(keyPrefix + key, Math.ceil(ttl), "NX").exec();
      const [error, count] = result?.[0] ?? [new Error("empty MULTI reply"), 0];
      if (error) throw error;
      return Number(count);
    },
  };
}
