import type { Redis } from "ioredis";

/**
 * Fixed-window counters, the one store behind every limit: better-auth's per-address rate limits
 * (`counterRateLimitStorage`), the per-account sign-in lockout, device enrollment, the code-entry page
 * and MCP's per-token limit (`createRateLimiter`). A window starts with a key's first hit and lasts
 * `windowMs`; its count is forgotten when it ends. In this process (`createMemoryCounterStore`, bounded) for
 * one replica, or in Redis (`createRedisCounterStore`, one Lua script) shared by every replica, as
 * `@fastify/rate-limit`'s two stores are. A Redis store rejects when Redis cannot be reached: each user
 * answers 503, never lets everyone through.
 */
export interface CounterStore {
  /** Counts one hit; resolves to the count in the key's window and the milliseconds until it ends. */
  hit(key: string, windowMs: number): Promise<{ count: number; msLeft: number }>;
  /** The count in the key's current window, 0 when none. */
  get(key: string): Promise<number>;
  /** Takes back one hit (only failures count): never below zero, and never restarts an ended window. */
  refund(key: string): Promise<void>;
  /** Forgets the key's window. */
  reset(key: string): Promise<void>;
}

/** How many keys the in-memory store holds at most (about 150 bytes each). */
export const MEMORY_COUNTERS_MAX_ENTRIES = 10_000;

/**
 * Counters in this process. Bounded: entries are kept in the order their windows started, which for one
 * window length is the order they end in, so each new key first drops the ended ones at the front, and at
 * `maxEntries` live keys the oldest goes. A spray of ever new keys (sign-ins with new addresses, enrollments
 * from new addresses) costs at most `maxEntries` entries, never unbounded memory; the price is that a spray
 * larger than that within one window can push out a key's count early (Redis has no such limit). A store
 * serving several window lengths keeps the bound; only the order of eviction is then approximate.
 */
export function createMemoryCounterStore(options: { maxEntries?: number; now?: () => number } = {}): CounterStore & { readonly size: number } {
  const maxEntries = options.maxEntries ?? MEMORY_COUNTERS_MAX_ENTRIES;
  const now = options.now ?? Date.now;
  const windows = new Map<string, { count: number; endsAt: number }>();
  const live = (key: string) => {
    const entry = windows.get(key);
    if (entry && entry.endsAt <= now()) windows.delete(key);
    return windows.get(key);
  };
  /** Room for one more key: ended windows at the front go, then the oldest live ones past the bound. */
  const makeRoom = () => {
    const t = now();
    for (const [key, entry] of windows) {
      if (entry.endsAt > t && windows.size < maxEntries) break;
      windows.delete(key);
    }
  };
  return {
    get size() {
      return windows.size;
    },
    async hit(key, windowMs) {
      let entry = live(key);
      if (!entry) {
        makeRoom();
        entry = { count: 0, endsAt: now() + windowMs };
        windows.set(key, entry);
      }
      entry.count += 1;
      return { count: entry.count, msLeft: entry.endsAt - now() };
    },
    async get(key) {
      return live(key)?.count ?? 0;
    },
    async refund(key) {
      const entry = live(key);
      if (entry && entry.count > 0) entry.count -= 1;
    },
    async reset(key) {
      windows.delete(key);
    },
  };
}

/**
 * One script for a hit and a refund, so each is one atomic round trip (ARGV[2] is 1 or -1). A hit
 * starts the window on the key's first count (and on a key left without an expiry, which would
 * otherwise never end); a refund never goes below zero and never creates a key, so it cannot restart an
 * ended window. Returns the count and the milliseconds left.
 */
const COUNT_SCRIPT = `
if ARGV[2] == '-1' then
  local count = tonumber(redis.call('GET', KEYS[1]) or '0')
  if count > 0 then count = redis.call('DECR', KEYS[1]) end
  return {count, redis.call('PTTL', KEYS[1])}
end
local count = redis.call('INCR', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {count, left}`;

/** The same counters in Redis, one key per counter (`prefix` + key) that expires with its window. */
export function createRedisCounterStore(redis: Redis, options: { prefix: string }): CounterStore {
  const keyOf = (key: string) => `${options.prefix}${key}`;
  return {
    async hit(key, windowMs) {
      const [count, msLeft] = (await redis.eval(COUNT_SCRIPT, 1, keyOf(key), String(Math.max(1, Math.ceil(windowMs))), "1")) as [number, number];
      return { count, msLeft: Math.max(msLeft, 0) };
    },
    async get(key) {
      return Number((await redis.get(keyOf(key))) ?? 0);
    },
    async refund(key) {
      await redis.eval(COUNT_SCRIPT, 1, keyOf(key), "0", "-1");
    },
    async reset(key) {
      await redis.del(keyOf(key));
    },
  };
}
