import type { Redis } from "ioredis";

/**
 * A fixed-window counter per key (the client address, for enrollment). In memory (one replica; a
 * restart forgets the counts) or in Redis (shared by every replica: `createRedisRateLimiter`).
 */
export interface RateLimiter {
  /** Counts one hit; resolves to 0 when allowed, else the seconds until the window resets. */
  hit(key: string): Promise<number>;
  /** Takes back one hit (e.g. the attempt succeeded, so only failures count). */
  refund(key: string): Promise<void>;
}

export interface RateLimit {
  max: number;
  windowMs: number;
}

/** Keys are swept when their window ends, so memory is bounded by the addresses seen in one window. */
export function createRateLimiter(options: RateLimit & { now?: () => number }): RateLimiter {
  const now = options.now ?? Date.now;
  const windows = new Map<string, { start: number; count: number }>();
  let lastSweep = now();

  return {
    async hit(key) {
      const t = now();
      if (t - lastSweep > options.windowMs) {
        for (const [k, w] of windows) if (t - w.start >= options.windowMs) windows.delete(k);
        lastSweep = t;
      }
      let window = windows.get(key);
      if (!window || t - window.start >= options.windowMs) {
        window = { start: t, count: 0 };
        windows.set(key, window);
      }
      window.count += 1;
      if (window.count <= options.max) return 0;
      return Math.max(1, Math.ceil((window.start + options.windowMs - t) / 1000));
    },
    async refund(key) {
      const window = windows.get(key);
      if (window && window.count > 0) window.count -= 1;
    },
  };
}

/** Counts and starts the window in one step: INCR, and the expiry only on the window's first hit. */
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {count, redis.call('PTTL', KEYS[1])}`;

/** Never below zero, and never resurrects an expired window. */
const REFUND_SCRIPT = `
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count > 0 then redis.call('DECR', KEYS[1]) end
return 0`;

/**
 * The same counter in Redis, shared by every replica: each key is one Redis key that expires with
 * its window. A Redis failure rejects (the route answers 503), never lets everyone through silently.
 */
export function createRedisRateLimiter(redis: Redis, options: RateLimit & { prefix: string }): RateLimiter {
  const keyOf = (key: string) => `${options.prefix}${key}`;
  return {
    async hit(key) {
      const [count, ttl] = (await redis.eval(HIT_SCRIPT, 1, keyOf(key), String(options.windowMs))) as [number, number];
      if (count <= options.max) return 0;
      return Math.max(1, Math.ceil(Math.max(ttl, 0) / 1000));
    },
    async refund(key) {
      await redis.eval(REFUND_SCRIPT, 1, keyOf(key));
    },
  };
}
