import type { BetterAuthPlugin } from "better-auth";
import { APIError, createAuthMiddleware, isAPIError } from "better-auth/api";
import { isDatabaseUnavailable } from "../../db/unavailable.js";

/**
 * A database outage answers 503 `DATABASE_UNAVAILABLE` on the auth API too. Errors better-auth leaves
 * alone reach Fastify's error handler (`onAPIError.throw`), which says so; this hook covers the
 * endpoints that wrap the failure in a 500 of their own first (e.g. `get-session`).
 */
export const databaseOutagePlugin = {
  id: "tether-database-outage",
  hooks: {
    after: [
      {
        matcher: () => true,
        handler: createAuthMiddleware(async (ctx) => {
          const returned = ctx.context.returned;
          if (isAPIError(returned) && returned.statusCode >= 500 && isDatabaseUnavailable(returned.cause)) {
            throw new APIError("SERVICE_UNAVAILABLE", {
              code: "DATABASE_UNAVAILABLE",
              message: "The database is unavailable right now; try again in a moment",
            });
          }
        }),
      },
    ],
  },
} satisfies BetterAuthPlugin;
