import { createHash } from "node:crypto";
import type { BetterAuthPlugin } from "better-auth";
import { APIError, createAuthMiddleware } from "better-auth/api";
import { createMemoryCounterStore, type CounterStore } from "../../db/counter-store.js";
import type { ActivityEntry } from "../activity/events.js";
import { requestOrigin } from "./request-origin.js";

export interface SignInLockoutOptions {
  /** Failed sign-ins for one address within the window after which that address is refused. */
  maxFailures: number;
  /** The window, counted from the first failure; the refusal lasts until it ends. */
  windowSeconds: number;
  /** Shared counters across replicas (Redis); this process's memory (bounded) when omitted. */
  store?: CounterStore;
  record?: (entry: ActivityEntry) => void;
}

export const SIGN_IN_LOCKED = "SIGN_IN_LOCKED";

/** The counter's key: a digest, so the store never holds the addresses people typed. */
const counterKey = (email: string) => `sign-in-failures:${createHash("sha256").update(email.trim().toLowerCase()).digest("hex")}`;

/**
 * Guessing protection per account, besides the per-IP rate limit: failed email sign-ins are counted
 * per submitted address, and once an address has `maxFailures` within the window every further
 * attempt on it (right password or not) is refused until the window ends. Addresses with no account
 * are counted and refused exactly the same way, so the answer never tells whether an account exists.
 */
export function signInLockout(options: SignInLockoutOptions): BetterAuthPlugin {
  const store = options.store ?? createMemoryCounterStore();
  const minutes = Math.max(1, Math.ceil(options.windowSeconds / 60));
  const isEmailSignIn = (context: { path?: string }) => context.path === "/sign-in/email";
  const emailOf = (body: unknown): string | undefined => {
    const email = (body as { email?: unknown } | undefined)?.email;
    return typeof email === "string" && email.trim() !== "" ? email : undefined;
  };

  return {
    id: "tether-sign-in-lockout",
    hooks: {
      before: [
        {
          matcher: isEmailSignIn,
          handler: createAuthMiddleware(async (ctx) => {
            const email = emailOf(ctx.body);
            if (!email) return;
            const failures = await store.get(counterKey(email));
            if (failures < options.maxFailures) return;
            const found = await ctx.context.internalAdapter.findUserByEmail(email.trim().toLowerCase());
            options.record?.({
              userId: found?.user.id ?? null,
              event: "sign-in.locked",
              actor: "visitor",
              outcome: "error",
              errorCode: SIGN_IN_LOCKED,
              ...requestOrigin(ctx.headers),
              detail: found ? { method: "password" } : { method: "password", email: email.trim().toLowerCase().slice(0, 254) },
            });
            throw new APIError(
              "TOO_MANY_REQUESTS",
              { code: SIGN_IN_LOCKED, message: `Too many failed sign-ins for this address. Wait ${minutes} minutes, then try again, or reset your password.` },
              { "X-Retry-After": String(options.windowSeconds) },
            );
          }),
        },
      ],
      after: [
        {
          matcher: isEmailSignIn,
          handler: createAuthMiddleware(async (ctx) => {
            const email = emailOf(ctx.body);
            if (!email) return;
            const returned = ctx.context.returned;
            if (returned instanceof APIError) {
              if (returned.statusCode === 401) await store.hit(counterKey(email), options.windowSeconds * 1000);
            } else {
              await store.reset(counterKey(email));
            }
          }),
        },
      ],
    },
  };
}
