import type { BetterAuthRateLimitStorage } from "better-auth";
import type { CounterStore } from "../../db/counter-store.js";
import { HttpError } from "../../http/errors.js";

/**
 * better-auth's counters on the one counter store (src/db/counter-store.ts): its per-address rate limits
 * (`counterRateLimitStorage`) and the per-account sign-in lockout. Only counters live there. Sessions and
 * users stay in the database alone (better-auth gets no `secondaryStorage`), so a change made straight in the
 * database (an admin's SQL deactivating a user or deleting sessions) applies on every path, better-auth's own
 * endpoints included, and a Redis outage can never keep a revoked session alive.
 *
 * With Redis unreachable a limit cannot be enforced, and limits are never skipped silently: the call
 * answers 503 `RATE_LIMIT_UNAVAILABLE` within the client's command timeout (`unavailableWhenDown`). Sign-out
 * is not rate limited (create-auth.ts), so it needs no Redis and always works.
 */
export function counterRateLimitStorage(store: CounterStore): BetterAuthRateLimitStorage {
  return {
    async consume(key, rule) {
      const { count, msLeft } = await store.hit(key, rule.window * 1000);
      if (count <= rule.max) return { allowed: true, retryAfter: null };
      return { allowed: false, retryAfter: msLeft > 0 ? Math.ceil(msLeft / 1000) : rule.window };
    },
  };
}

/** The same store, its failures turned into the 503 that sign-in answers when its counters cannot be reached. */
export function unavailableWhenDown(store: CounterStore): CounterStore {
  return {
    hit: (key, windowMs) => unavailableOnError(store.hit(key, windowMs)),
    get: (key) => unavailableOnError(store.get(key)),
    refund: (key) => unavailableOnError(store.refund(key)),
    reset: (key) => unavailableOnError(store.reset(key)),
  };
}

const unavailable = (cause: unknown) =>
  new HttpError(503, "RATE_LIMIT_UNAVAILABLE", "Signing in is unavailable for a moment (the rate limiter cannot be reached); try again shortly", { cause });

function unavailableOnError<T>(command: Promise<T>): Promise<T> {
  return command.catch((error: unknown) => {
    throw unavailable(error);
  });
}
