import { createHmac, timingSafeEqual } from "node:crypto";
import type { BetterAuthPlugin } from "better-auth";
import { createAuthMiddleware, getAuthoritativeSessionFromCtx } from "better-auth/api";
import { symmetricDecrypt } from "better-auth/crypto";
import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";

type HookContext = Parameters<Parameters<typeof createAuthMiddleware>[0]>[0];

const VERIFY_TOTP = "/two-factor/verify-totp";
/** better-auth's two-factor challenge cookie (`two_factor`), set between the password and the code. */
const TWO_FACTOR_COOKIE = "two_factor";
/** What the plugin is handed instead of a code this hook did not claim: no code ever equals it. */
const UNCLAIMED = "unclaimed";
/** The two-factor plugin's verification window: the current step and one either side. */
const WINDOW = 1;
/** How the two-factor plugin marks a secret imported from elsewhere (stored as `base32:<secret>`). */
const BASE32_PREFIX = "base32:";

/**
 * Claims `step` for the two-factor row: true when it is later than the last accepted step (and is now
 * the last), false when that step or a later one was accepted already. One conditional UPDATE, so of
 * two concurrent claims of the same step exactly one wins: PostgreSQL re-checks the condition against
 * the row the first one committed.
 */
export async function claimTotpStep(db: Kysely<Database>, twoFactorId: string, step: number): Promise<boolean> {
  const claimed = await db
    .updateTable("twoFactor")
    .set({ lastAcceptedStep: step })
    .where("id", "=", twoFactorId)
    .where((eb) => eb.or([eb("lastAcceptedStep", "is", null), eb("lastAcceptedStep", "<", step)]))
    .returning("id")
    .executeTakeFirst();
  return claimed !== undefined;
}

/**
 * RFC 6238 §5.2: a TOTP code is accepted once. better-auth's two-factor plugin accepts a code for as
 * long as its time step is in the window (about a minute), so a code seen over a shoulder or phished
 * signs in a second time. This plugin's before-hook on `/two-factor/verify-totp` (every TOTP check:
 * the sign-in's second step and the code that turns two-factor on) finds the time step the code
 * belongs to, with the same secret, window and arithmetic as the plugin, and claims it atomically
 * (`claimTotpStep`). The plugin only ever sees a code whose step was just claimed; any other code
 * (wrong, or at the last accepted step or earlier) reaches it as a value that matches nothing, so
 * the plugin refuses it with its own `INVALID_CODE` and counts it with its own failure limits (per
 * challenge and per account), exactly like a wrong code.
 */
export function totpReplayGuard(db: Kysely<Database>): BetterAuthPlugin {
  return {
    id: "tether-totp-replay",
    hooks: {
      before: [
        {
          matcher: (context) => context.path === VERIFY_TOTP,
          handler: createAuthMiddleware(async (ctx) => {
            const body = (ctx.body ?? {}) as { code?: unknown };
            if (typeof body.code !== "string") return; // the plugin refuses the body itself
            const userId = await verifyingUser(ctx);
            if (!userId) return; // the plugin answers with its own error (no challenge, no session)
            const row = await ctx.context.adapter.findOne<{ id: string; secret: string }>({ model: "twoFactor", where: [{ field: "userId", value: userId }] });
            if (!row) return; // TOTP_NOT_ENABLED, from the plugin
            const { period, digits } = totpOptions(ctx);
            const key = await secretKey(ctx, row.secret);
            for (const step of matchingSteps(key, body.code, period, digits)) {
              if (await claimTotpStep(db, row.id, step)) return;
            }
            return { context: { body: { ...body, code: UNCLAIMED } } };
          }),
        },
      ],
    },
  };
}

/** Whose code this is, as the plugin decides it: the signed-in user, else the sign-in challenge's. */
async function verifyingUser(ctx: HookContext): Promise<string | null> {
  const session = await getAuthoritativeSessionFromCtx(ctx).catch(() => null);
  if (session) return session.user.id;
  const cookie = ctx.context.createAuthCookie(TWO_FACTOR_COOKIE);
  const challenge = await ctx.getSignedCookie(cookie.name, ctx.context.secret);
  if (!challenge) return null;
  return (await ctx.context.internalAdapter.findVerificationValue(challenge))?.value ?? null;
}

function totpOptions(ctx: HookContext): { period: number; digits: number } {
  const plugin = ctx.context.getPlugin("two-factor") as { options?: { totpOptions?: { period?: number; digits?: number } } } | null;
  const options = plugin?.options?.totpOptions;
  return { period: options?.period || 30, digits: options?.digits || 6 };
}

/** The HMAC key the plugin uses: the decrypted secret's UTF-8 bytes, or an imported base32 secret's bytes. */
async function secretKey(ctx: HookContext, encrypted: string): Promise<Buffer> {
  const secret = await symmetricDecrypt({ key: ctx.context.secretConfig, data: encrypted });
  return secret.startsWith(BASE32_PREFIX) ? base32Bytes(secret.slice(BASE32_PREFIX.length)) : Buffer.from(secret, "utf8");
}

/** The steps in the window (earliest first) whose code is `code`; usually none or one. */
function matchingSteps(key: Buffer, code: string, period: number, digits: number): number[] {
  const current = Math.floor(Date.now() / (period * 1000));
  const presented = Buffer.from(code);
  const steps: number[] = [];
  for (let step = current - WINDOW; step <= current + WINDOW; step++) {
    const expected = Buffer.from(hotp(key, step, digits));
    if (presented.length === expected.length && timingSafeEqual(presented, expected)) steps.push(step);
  }
  return steps;
}

/** RFC 4226 HOTP (HMAC-SHA1, dynamic truncation), as RFC 6238 uses it with the time step as counter. */
function hotp(key: Buffer, counter: number, digits: number): string {
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(BigInt(counter));
  const digest = createHmac("sha1", key).update(message).digest();
  const offset = digest[digest.length - 1]! & 0x0f;
  return String((digest.readUInt32BE(offset) & 0x7fffffff) % 10 ** digits).padStart(digits, "0");
}

function base32Bytes(text: string): Buffer {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  const bytes: number[] = [];
  let bits = 0;
  let value = 0;
  for (const char of text.toUpperCase().replace(/=+$/, "")) {
    const index = alphabet.indexOf(char);
    if (index < 0) continue;
    value = ((value << 5) | index) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      bytes.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(bytes);
}
