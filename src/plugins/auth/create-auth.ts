import { betterAuth, type Auth as BetterAuth, type BetterAuthOptions, type BetterAuthPlugin } from "better-auth";
import { APIError } from "better-auth/api";
import { passkey } from "@better-auth/passkey";
import { twoFactor } from "better-auth/plugins";
import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import { createMemoryCounterStore, type CounterStore } from "../../db/counter-store.js";
import { counterRateLimitStorage, unavailableWhenDown } from "./rate-limit-storage.js";
import type { ActivityEntry } from "../activity/events.js";
import { accountRecovery } from "./account-recovery.js";
import { authActivity } from "./auth-activity.js";
import { passkeyRegistrationCheck } from "./passkey-registration.js";
import { signInLockout } from "./sign-in-lockout.js";
import { totpReplayGuard } from "./totp-replay.js";

import { trustedOriginList } from "../../http/origins.js";
import { CLIENT_IP_HEADER } from "./internal-headers.js";
import { databaseOutagePlugin } from "./outage.js";
import { userChangeHooks } from "./user-changes.js";

export interface ResetPasswordMessage {
  user: { id: string; email: string; name: string };
  url: string;
  token: string;
}

export interface CreateAuthOptions {
  db: Kysely<Database>;
  /** Auth base URL (e.g. `https://app.example.com`). Always a trusted origin. */
  baseURL: string;
  secret: string;
  /** Further trusted origins (already validated origins). */
  trustedOrigins?: string[];
  /**
   * Where the rate limits and the per-account sign-in lockout count (`createRedisCounterStore` from `tether/db`
   * to share them between replicas); this process's memory, bounded, when omitted. Sessions never go there: the
   * database is their one source of truth.
   */
  counters?: CounterStore;
  /** Password-reset delivery. When omitted, reset links are generated but never delivered. */
  sendResetPassword?: (message: ResetPasswordMessage) => Promise<void> | void;
  /** Rate limiting; the example app turns it on exactly when NODE_ENV=production. */
  rateLimit?: boolean;
  /** Passkey registration and sign-in (`PASSKEYS_ENABLED=true`); the relying party is `baseURL`. */
  passkeys?: boolean;
  /** Guessing protection per account (see sign-in-lockout.ts); 5 failures in 15 minutes by default. */
  signInLockout?: { maxFailures: number; windowSeconds: number };
  /** Where security events go (the activity log's writer); nowhere when omitted. */
  recordActivity?: (entry: ActivityEntry) => void;
  /** Extra plugins, composed after the built-in ones. */
  plugins?: BetterAuthPlugin[];
}

/** Session lifetime: 7 days, extended (at most once a day) while the user keeps coming back. */
export const SESSION_EXPIRES_IN_SECONDS = 7 * 24 * 60 * 60;
export const SESSION_UPDATE_AGE_SECONDS = 24 * 60 * 60;
export const DEFAULT_SIGN_IN_LOCKOUT = { maxFailures: 5, windowSeconds: 15 * 60 };

/**
 * Builds the app's one better-auth instance. There is no singleton: the consuming app calls this once
 * and hands the result to the `tether-auth` plugin.
 */
export function createAuth(options: CreateAuthOptions): Auth {
  const userChanges = userChangeHooks();
  const counters = unavailableWhenDown(options.counters ?? createMemoryCounterStore());
  const recordActivity = options.recordActivity ?? (() => {});
  const relyingParty = { origin: new URL(options.baseURL).origin, rpID: new URL(options.baseURL).hostname };
  const accountPlugins = [
    twoFactor({ issuer: "Tether" }),
    totpReplayGuard(options.db),
    ...(options.passkeys ? [passkey({ rpName: "Tether", ...relyingParty }), passkeyRegistrationCheck(relyingParty)] : []),
    signInLockout({
      ...(options.signInLockout ?? DEFAULT_SIGN_IN_LOCKOUT),
      store: counters,
      record: recordActivity,
    }),
    authActivity(recordActivity),
    accountRecovery(recordActivity),
  ];
  const authOptions = {
    appName: "Tether",
    baseURL: options.baseURL,
    basePath: "/api/auth",
    secret: options.secret,
    trustedOrigins: trustedOriginList(options.baseURL, options.trustedOrigins),
    database: { db: options.db, type: "postgres", transaction: true },
    telemetry: { enabled: false },
    emailAndPassword: {
      enabled: true,
      minPasswordLength: 8,
      autoSignIn: true,
      revokeSessionsOnPasswordReset: true,
      // This process's session cache forgets the user before the response leaves (other processes
      // hear of the deleted sessions from the database).
      onPasswordReset: async ({ user }) => userChanges.onPasswordReset(user),
      sendResetPassword: async ({ user, url, token }) => {
        await options.sendResetPassword?.({ user: { id: user.id, email: user.email, name: user.name }, url, token });
      },
    },
    user: {
      additionalFields: {
        isSiteAdmin: { type: "boolean", required: false, defaultValue: false, input: false },
        deactivatedAt: { type: "date", required: false, input: false },
      },
    },
    session: {
      expiresIn: SESSION_EXPIRES_IN_SECONDS,
      updateAge: SESSION_UPDATE_AGE_SECONDS,
    },
    rateLimit: {
      enabled: options.rateLimit ?? false,
      window: 60,
      max: 100,
      customStorage: counterRateLimitStorage(counters),
      customRules: {
        // Never counted, so signing out needs no rate-limit store and works through a Redis outage.
        "/sign-out": false,
        "/sign-in/*": { window: 60, max: 10 },
        "/sign-up/*": { window: 60, max: 10 },
        "/request-password-reset": { window: 60, max: 5 },
        "/edge/*": { window: 60, max: 30 },
      },
    },
    advanced: {
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] },
      // Tether checks Origin/Referer for every state-changing request in one Fastify hook
      // (see origin-guard.ts), including these routes. Callback URLs are still validated.
      disableCSRFCheck: true,
    },
    databaseHooks: {
      session: {
        create: {
          // A deactivated user cannot start a session by any sign-in method. Hooks must query
          // through the internal adapter: the outer Kysely instance deadlocks PGlite here.
          before: async (session, ctx) => {
            const user = await ctx?.context.internalAdapter.findUserById(session.userId);
            if (user && (user as { deactivatedAt?: Date | null }).deactivatedAt) {
              throw new APIError("FORBIDDEN", { code: "ACCOUNT_DEACTIVATED", message: "This account is deactivated" });
            }
          },
        },
      },
    },
    // Errors that are not better-auth's own (a database outage) reach Fastify's error handler.
    onAPIError: { throw: true },
    plugins: [userChanges.plugin, databaseOutagePlugin, ...accountPlugins, ...(options.plugins ?? [])],
  } satisfies BetterAuthOptions;
  const auth = betterAuth(authOptions);
  userChanges.adopt(auth);
  // Widened to better-auth's general type (see `Auth`); `$context`'s adapter is invariant in the options, so the
  // widening needs the cast.
  return auth as unknown as Auth;
}

/**
 * The better-auth instance `createAuth` builds, as better-auth types any instance: `handler` (a Web `Request` in,
 * a `Response` out), `api` (its endpoints as functions), `options` and `$context`. Written out rather than
 * inferred so that the public API names better-auth's type instead of spelling out every option and endpoint
 * of the configured instance (the plugins' endpoints are typed where Tether calls them).
 */
export type Auth = Omit<BetterAuth<BetterAuthOptions>, "options"> & {
  /** The options `createAuth` built; `baseURL` and `basePath` are always set. */
  options: Omit<BetterAuthOptions, "baseURL" | "basePath"> & { baseURL: string; basePath: string };
};
