import type { BetterAuthPlugin } from "better-auth";
import { APIError, createAuthMiddleware } from "better-auth/api";
import type { ActivityEntry, ActivityEvent } from "../activity/events.js";
import { requestOrigin } from "./request-origin.js";

type HookContext = Parameters<Parameters<typeof createAuthMiddleware>[0]>[0];

/** Endpoints that change an account while signed in, and the event each success is. */
const ACCOUNT_CHANGES: Record<string, ActivityEvent> = {
  "/change-password": "password.change",
  "/two-factor/disable": "two-factor.disable",
  "/passkey/verify-registration": "passkey.add",
  "/passkey/delete-passkey": "passkey.remove",
  "/revoke-session": "session.revoke",
  "/revoke-other-sessions": "session.revoke-others",
  "/revoke-sessions": "session.revoke-all",
};

/** Second-factor endpoints: a sign-in's second step, or (signed in) the code that turns TOTP on. */
const SECOND_FACTORS: Record<string, string> = {
  "/two-factor/verify-totp": "password+totp",
  "/two-factor/verify-backup-code": "password+backup-code",
};

const WATCHED = new Set([
  "/sign-up/email",
  "/sign-in/email",
  "/passkey/verify-authentication",
  ...Object.keys(ACCOUNT_CHANGES),
  ...Object.keys(SECOND_FACTORS),
]);

/** better-auth's two-factor challenge cookie (`two_factor`), set between the password and the code. */
const TWO_FACTOR_COOKIE = "two_factor";

/**
 * Records the account's security events in the activity log from better-auth's own after-hooks
 * (they run for every sign-in method and every caller, HTTP or `auth.api.*`), never wrapping its
 * endpoints. `record` queues the row: nothing here waits for the database write.
 */
export function authActivity(record: (entry: ActivityEntry) => void): BetterAuthPlugin {
  const entry = (ctx: HookContext, fields: Omit<ActivityEntry, "ipAddress" | "userAgent">) => record({ ...fields, ...requestOrigin(ctx.headers) });

  const failureCode = (returned: unknown) => {
    if (!(returned instanceof APIError)) return null;
    const code = (returned.body as { code?: unknown } | undefined)?.code;
    return typeof code === "string" ? code : returned.status;
  };

  async function signInWithPassword(ctx: HookContext, failed: boolean) {
    const submitted = (ctx.body as { email?: unknown } | undefined)?.email;
    const email = (typeof submitted === "string" ? submitted : "").trim().toLowerCase();
    if (!failed) {
      // With two-factor on, the password step creates no session (newSession is null): the
      // sign-in is recorded when the code is accepted.
      const session = ctx.context.newSession;
      if (session) entry(ctx, { userId: session.user.id, event: "sign-in", actor: "visitor", outcome: "ok", detail: { method: "password" } });
      return;
    }
    const found = email ? await ctx.context.internalAdapter.findUserByEmail(email) : null;
    entry(ctx, {
      userId: found?.user.id ?? null,
      event: "sign-in.failed",
      actor: "visitor",
      outcome: "error",
      errorCode: String(failureCode(ctx.context.returned)),
      // The address is kept only when it names no account (the admin's view of guessing).
      detail: found ? { method: "password" } : { method: "password", email: email.slice(0, 254) },
    });
  }

  async function secondFactor(ctx: HookContext, method: string, failed: boolean) {
    const cookie = ctx.context.createAuthCookie(TWO_FACTOR_COOKIE);
    const challenge = await ctx.getSignedCookie(cookie.name, ctx.context.secret);
    if (challenge) {
      const userId = failed ? ((await ctx.context.internalAdapter.findVerificationValue(challenge))?.value ?? null) : (ctx.context.newSession?.user.id ?? null);
      entry(
        ctx,
        failed
          ? { userId, event: "sign-in.failed", actor: "visitor", outcome: "error", errorCode: String(failureCode(ctx.context.returned)), detail: { method } }
          : { userId, event: "sign-in", actor: "visitor", outcome: "ok", detail: { method } },
      );
      return;
    }
    // Signed in: a first accepted code turns TOTP on, and better-auth then renews the session.
    const renewed = ctx.context.newSession;
    if (!failed && renewed) entry(ctx, { userId: renewed.user.id, event: "two-factor.enable", actor: "session", outcome: "ok" });
  }

  return {
    id: "tether-auth-activity",
    hooks: {
      after: [
        {
          matcher: (context) => WATCHED.has(context.path ?? ""),
          handler: createAuthMiddleware(async (ctx) => {
            const path = ctx.path;
            const failed = ctx.context.returned instanceof APIError;
            if (path === "/sign-in/email") return signInWithPassword(ctx, failed);
            if (path === "/sign-up/email") {
              const created = ctx.context.newSession;
              if (created) entry(ctx, { userId: created.user.id, event: "sign-up", actor: "visitor", outcome: "ok" });
              return;
            }
            const method = SECOND_FACTORS[path];
            if (method) return secondFactor(ctx, method, failed);
            if (path === "/passkey/verify-authentication") {
              const userId = ctx.context.newSession?.user.id ?? null;
              entry(
                ctx,
                failed
                  ? {
                      userId,
                      event: "sign-in.failed",
                      actor: "visitor",
                      outcome: "error",
                      errorCode: String(failureCode(ctx.context.returned)),
                      detail: { method: "passkey" },
                    }
                  : { userId, event: "sign-in", actor: "visitor", outcome: "ok", detail: { method: "passkey" } },
              );
              return;
            }
            const event = ACCOUNT_CHANGES[path];
            const userId = ctx.context.session?.user.id ?? ctx.context.newSession?.user.id;
            if (!event || failed || !userId) return;
            const body = ctx.body as { revokeOtherSessions?: unknown; name?: unknown } | undefined;
            const detail: ActivityEntry["detail"] =
              event === "password.change"
                ? { otherSessionsSignedOut: body?.revokeOtherSessions === true }
                : event === "passkey.add" && typeof body?.name === "string"
                  ? { name: body.name.slice(0, 100) }
                  : null;
            entry(ctx, { userId, event, actor: "session", outcome: "ok", detail });
          }),
        },
      ],
    },
  };
}
