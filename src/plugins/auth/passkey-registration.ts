import { verifyRegistrationResponse, type RegistrationResponseJSON } from "@simplewebauthn/server";
import type { BetterAuthPlugin } from "better-auth";
import { APIError, createAuthMiddleware } from "better-auth/api";

/** A registration the browser made that this site cannot accept (another site's, or unreadable). */
export const PASSKEY_REGISTRATION_REFUSED = "PASSKEY_REGISTRATION_REFUSED";

/** @better-auth/passkey's challenge cookie (its `advanced.webAuthnChallengeCookie` default). */
const CHALLENGE_COOKIE = "better-auth-passkey";

export interface PasskeyRegistrationCheckOptions {
  /** The origin passkeys are made on (the passkey plugin's `origin`). */
  origin: string;
  /** The relying party id (the passkey plugin's `rpID`, by default the base URL's host name). */
  rpID: string;
}

/**
 * Turns a refused passkey registration into a 400 that says what to do. @better-auth/passkey answers
 * every failed check of the browser's answer (made on another origin, for another relying party,
 * unreadable) with a 500 "Failed to verify registration" and logs the cause. This hook checks the
 * answer first, exactly as the plugin will (same challenge, origin and relying party, same library),
 * and refuses it with the reason in words; an answer that passes here passes there too, so what is
 * left to the plugin's 500 is a real fault on our side.
 */
export function passkeyRegistrationCheck(options: PasskeyRegistrationCheckOptions): BetterAuthPlugin {
  return {
    id: "tether-passkey-registration-check",
    hooks: {
      before: [
        {
          matcher: (context) => context.path === "/passkey/verify-registration",
          handler: createAuthMiddleware(async (ctx) => {
            // Only a caller holding a live registration challenge is checked: without one, the plugin
            // answers its own 400 (challenge not found) or 401, unchanged.
            const cookie = ctx.context.createAuthCookie(CHALLENGE_COOKIE);
            const token = await ctx.getSignedCookie(cookie.name, ctx.context.secret);
            if (!token) return;
            const stored = await ctx.context.internalAdapter.findVerificationValue(token);
            const challenge = registrationChallenge(stored?.value);
            if (challenge === undefined) return;
            const response = (ctx.body as { response?: unknown } | undefined)?.response;
            try {
              await verifyRegistrationResponse({
                response: response as RegistrationResponseJSON,
                expectedChallenge: challenge,
                expectedOrigin: options.origin,
                expectedRPID: options.rpID,
                requireUserVerification: false,
              });
            } catch (error) {
              throw new APIError("BAD_REQUEST", { code: PASSKEY_REGISTRATION_REFUSED, message: refusal(error, options) });
            }
          }),
        },
      ],
    },
  };
}

function registrationChallenge(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    const data = JSON.parse(value) as { type?: unknown; expectedChallenge?: unknown };
    return data.type === "registration" && typeof data.expectedChallenge === "string" ? data.expectedChallenge : undefined;
  } catch {
    return undefined;
  }
}

/** The library's reason, in words a person can act on. */
function refusal(error: unknown, { origin, rpID }: PasskeyRegistrationCheckOptions): string {
  const reason = error instanceof Error ? error.message : "";
  if (/response origin/.test(reason)) {
    return `This passkey was made on another site, not on ${origin}. Open ${origin} in your browser and add the passkey there.`;
  }
  if (/RP ID hash/.test(reason)) {
    return `This passkey is for another site, not ${rpID}. Add a new passkey for ${rpID}.`;
  }
  if (/response challenge/.test(reason)) {
    return "This passkey answers an older request. Start adding the passkey again.";
  }
  return "Your browser's answer could not be read as a new passkey. Try adding the passkey again, or use another authenticator.";
}
