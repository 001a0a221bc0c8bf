import type { Auth as BetterAuth, BetterAuthOptions, BetterAuthPlugin } from "better-auth";
import { generateRandomString } from "better-auth/crypto";
import type { ActivityEntry } from "../activity/events.js";
import { verifySignedCookie } from "../session/cookie-signature.js";
import { afterPasswordReset } from "./password-reset.js";
import { requestOrigin } from "./request-origin.js";

/** The recovery cookie (better-auth's prefix is added: `better-auth.recovery`), sent to the reset pages only. */
export const RECOVERY_COOKIE = "recovery";
export const RECOVERY_COOKIE_PATH = "/reset-password";
/** How long after a reset its confirmation page may still list and revoke credentials. */
export const RECOVERY_SECONDS = 15 * 60;
/**
 * The verification rows it stands for. The prefix is checked when the cookie is read: better-auth's
 * two-factor challenge cookie is signed with the same secret and names a row whose value is a user
 * id too, and must never pass for a recovery.
 */
const IDENTIFIER_PREFIX = "tether-recovery:";

/**
 * After a password reset (page or JSON API) succeeded: records `password.reset`, and hands the browser
 * a short-lived recovery cookie with which the confirmation page lists what survived the reset (API
 * tokens, devices, passkeys) and revokes them, the sessions and OAuth grants being gone already.
 *
 * Not for an account with two-factor on: a reset needs only the mailbox, and the mailbox alone must
 * not read or change such an account's credentials; its owner signs in (with the second factor) and
 * reviews them on the settings pages.
 */
export function accountRecovery(record: (entry: ActivityEntry) => void): BetterAuthPlugin {
  const reset = afterPasswordReset(async (ctx, userId) => {
    record({ userId, event: "password.reset", actor: "visitor", outcome: "ok", ...requestOrigin(ctx.headers) });
    const user = (await ctx.context.internalAdapter.findUserById(userId)) as { twoFactorEnabled?: boolean | null } | null;
    if (!user || user.twoFactorEnabled) return;
    const identifier = `${IDENTIFIER_PREFIX}${generateRandomString(32)}`;
    await ctx.context.internalAdapter.createVerificationValue({ identifier, value: userId, expiresAt: new Date(Date.now() + RECOVERY_SECONDS * 1000) });
    const cookie = ctx.context.createAuthCookie(RECOVERY_COOKIE, { maxAge: RECOVERY_SECONDS });
    await ctx.setSignedCookie(cookie.name, identifier, ctx.context.secret, { ...cookie.attributes, path: RECOVERY_COOKIE_PATH, sameSite: "strict" });
  });
  return { id: "tether-account-recovery", hooks: { before: reset.before, after: reset.after } };
}

/**
 * Reads recovery cookies for `auth` (only its context: typed as better-auth types it, not as create-auth.ts
 * builds it, which registers this file's plugin): the user a request's cookie stands for while it lasts, or null
 * (no cookie, a forged or foreign one, or expired).
 */
export async function recoveryReader(
  auth: Pick<BetterAuth<BetterAuthOptions>, "$context">,
): Promise<{ cookieName: string; userOf(cookies: Record<string, string | undefined>): Promise<string | null> }> {
  const context = await auth.$context;
  const cookieName = context.createAuthCookie(RECOVERY_COOKIE).name;
  return {
    cookieName,
    async userOf(cookies) {
      const identifier = verifySignedCookie(cookies[cookieName] ?? "", context.secret);
      if (!identifier?.startsWith(IDENTIFIER_PREFIX)) return null;
      const verification = await context.internalAdapter.findVerificationValue(identifier);
      return verification && verification.expiresAt > new Date() ? verification.value : null;
    },
  };
}
