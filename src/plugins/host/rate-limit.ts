import { createMemoryCounterStore, type CounterStore } from "../../db/counter-store.js";

/**
 * A fixed-window limit per key (the client address for enrollment and code entry, the token for MCP), on
 * the one counter store (src/db/counter-store.ts): in this process by default, or shared by every replica
 * with `createRedisCounterStore`.
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

/** `limit` on `store` (a bounded in-memory store of its own when omitted). A store that rejects makes `hit` reject: the route answers 503. */
export function createRateLimiter(limit: RateLimit, store: CounterStore = createMemoryCounterStore()): RateLimiter {
  return {
    async hit(key) {
      const { count, msLeft } = await store.hit(key, limit.windowMs);
      return count <= limit.max ? 0 : Math.max(1, Math.ceil(msLeft / 1000));
    },
    refund: (key) => store.refund(key),
  };
}
