import type { BetterAuthPlugin } from "better-auth";
import { createAuthMiddleware, isAPIError } from "better-auth/api";

type HookContext = Parameters<Parameters<typeof createAuthMiddleware>[0]>[0];
type Hooks = NonNullable<NonNullable<BetterAuthPlugin["hooks"]>["after"]>;

const RESET_PASSWORD = "/reset-password";

/**
 * Hooks that run `onReset(ctx, userId)` after better-auth's `/reset-password` succeeded (from the page
 * or the JSON API). The endpoint answers `{ status: true }` and consumes the reset token, so the
 * before-hook reads whose token it is first (the verification row the endpoint itself reads), and the
 * after-hook finds it again by the request's context object: better-auth hands the same one to the
 * before-hooks, the endpoint and the after-hooks of one call.
 */
export function afterPasswordReset(onReset: (ctx: HookContext, userId: string) => Promise<void>): { before: Hooks; after: Hooks } {
  const resetting = new WeakMap<object, string>();
  const matcher = (context: { path?: string }) => context.path === RESET_PASSWORD;
  return {
    before: [
      {
        matcher,
        handler: createAuthMiddleware(async (ctx) => {
          const body = (ctx.body ?? {}) as { token?: unknown };
          const query = (ctx.query ?? {}) as { token?: unknown };
          const token = typeof body.token === "string" && body.token ? body.token : query.token;
          if (typeof token !== "string" || !token) return;
          const verification = await ctx.context.internalAdapter.findVerificationValue(`reset-password:${token}`);
          if (verification && verification.expiresAt > new Date()) resetting.set(ctx.context, verification.value);
        }),
      },
    ],
    after: [
      {
        matcher,
        handler: createAuthMiddleware(async (ctx) => {
          const userId = resetting.get(ctx.context);
          resetting.delete(ctx.context);
          if (userId && !isAPIError(ctx.context.returned)) await onReset(ctx, userId);
        }),
      },
    ],
  };
}
