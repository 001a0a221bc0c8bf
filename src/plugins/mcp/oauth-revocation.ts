import { getOAuthProviderState } from "@better-auth/oauth-provider";
import type { BetterAuthPlugin } from "better-auth";
import { createAuthMiddleware, getSessionFromCtx, isAPIError } from "better-auth/api";
import type { ActivityEntry } from "../activity/events.js";
import { afterPasswordReset } from "../auth/password-reset.js";
import { requestOrigin } from "../auth/request-origin.js";
import { notifyUserChangedFromHook } from "../auth/user-changes.js";

type HookContext = Parameters<Parameters<typeof createAuthMiddleware>[0]>[0];
type Adapter = HookContext["context"]["adapter"];
type Record = (entry: ActivityEntry) => void;

/** An OAuth client whose access a revocation ended, named as its registration names it. */
export interface RevokedClient {
  clientId: string;
  name: string;
}

/** Why a grant ended, as the activity log says it (`detail.reason`). */
export type RevocationReason = "owner" | "password-reset";

/**
 * Revokes the user's live OAuth access and refresh tokens: one client's, or every client's. A revoked
 * access token fails at /mcp on its next request (tokens are opaque rows, read on every request), and a
 * revoked refresh token mints nothing. Tokens revoked before keep their time (refresh-token rotation
 * reads it).
 */
export async function revokeOAuthTokens(adapter: Adapter, userId: string, clientId?: string): Promise<void> {
  const where = [
    { field: "userId", value: userId },
    { field: "revoked", value: null },
    ...(clientId === undefined ? [] : [{ field: "clientId", value: clientId }]),
  ];
  const update = { revoked: new Date() };
  await adapter.updateMany({ model: "oauthRefreshToken", where, update });
  await adapter.updateMany({ model: "oauthAccessToken", where, update });
}

/**
 * Ends the user's grants (one client's, or all): the consents go, so the client must ask again, and
 * every token is revoked. Returns the clients whose consent there was.
 */
export async function revokeOAuthGrants(adapter: Adapter, userId: string, clientId?: string): Promise<RevokedClient[]> {
  const where = [{ field: "userId", value: userId }, ...(clientId === undefined ? [] : [{ field: "clientId", value: clientId }])];
  const consents = await adapter.findMany<{ clientId: string }>({ model: "oauthConsent", where });
  if (consents.length > 0) await adapter.deleteMany({ model: "oauthConsent", where });
  await revokeOAuthTokens(adapter, userId, clientId);
  return clientsNamed(adapter, [...new Set(consents.map((consent) => consent.clientId))]);
}

/** The clients' names from their registrations (the id when a client gave none). */
export async function clientsNamed(adapter: Adapter, clientIds: string[]): Promise<RevokedClient[]> {
  if (clientIds.length === 0) return [];
  const clients = await adapter.findMany<{ clientId: string; name: string | null }>({
    model: "oauthClient",
    where: [{ field: "clientId", operator: "in", value: clientIds }],
  });
  const names = new Map(clients.map((client) => [client.clientId, client.name]));
  return clientIds.map((clientId) => ({ clientId, name: names.get(clientId) || clientId }));
}

/** The activity entry for a grant that ended. */
export function revokedEntry(
  userId: string,
  client: RevokedClient,
  reason: RevocationReason,
  actor: ActivityEntry["actor"],
  origin?: Pick<ActivityEntry, "ipAddress" | "userAgent">,
): ActivityEntry {
  return { userId, event: "oauth.revoke", actor, outcome: "ok", ...origin, detail: { client: client.name.slice(0, 100), clientId: client.clientId, reason } };
}

/** Signing out everywhere: every session at once, or every session but this one. */
const SIGN_OUT_EVERYWHERE = new Set(["/revoke-sessions", "/revoke-other-sessions"]);
const CONSENT = "/oauth2/consent";
const DELETE_CONSENT = "/oauth2/delete-consent";

/**
 * What ends OAuth access besides the owner's revoke button (see `revokeMcpOAuthGrant`), through
 * better-auth's hooks on the endpoints themselves, so the pages and the JSON API behave alike:
 *
 * - A password reset ends every grant: consents and tokens. Whoever took the account may have let
 *   their own client in; the owner allows their clients again after signing in.
 * - Signing out everywhere (`/revoke-sessions`, `/revoke-other-sessions`, a password change that signs
 *   out the other sessions) revokes every access and refresh token; consents stay, so the owner's
 *   clients get new tokens with one sign-in. All tokens, not only those of the sessions signed out: a
 *   token outlives the session it was issued in (the provider keeps it when that session ends), so
 *   which session it came from says nothing about who holds it now.
 * - Signing out one session leaves OAuth tokens alone: it is routine (leaving a browser), and a
 *   client is its own credential, listed with a revoke button on the MCP settings page.
 * - Consents given (`/oauth2/consent`) and deleted (`/oauth2/delete-consent`, which also revokes that
 *   client's tokens, or deleting the consent would leave them working) are in the activity log, with
 *   the client's name.
 */
export function oauthRevocation(record: Record): BetterAuthPlugin {
  const reset = afterPasswordReset(async (ctx, userId) => {
    const revoked = await revokeOAuthGrants(ctx.context.adapter, userId);
    for (const client of revoked) record(revokedEntry(userId, client, "password-reset", "visitor", requestOrigin(ctx.headers)));
    notifyUserChangedFromHook(ctx.context, userId);
  });
  /** The consent a `/oauth2/delete-consent` call deletes (read before, used after the endpoint). */
  const deleting = new WeakMap<object, { userId: string; clientId: string }>();

  return {
    id: "tether-mcp-oauth-revocation",
    hooks: {
      before: [
        ...reset.before,
        {
          matcher: (context) => context.path === DELETE_CONSENT,
          handler: createAuthMiddleware(async (ctx) => {
            const id = (ctx.body as { id?: unknown } | undefined)?.id;
            const session = typeof id === "string" ? await getSessionFromCtx(ctx) : null;
            if (!session || typeof id !== "string") return; // the endpoint refuses it itself
            const consent = await ctx.context.adapter.findOne<{ userId: string | null; clientId: string }>({
              model: "oauthConsent",
              where: [{ field: "id", value: id }],
            });
            if (consent && consent.userId === session.user.id) deleting.set(ctx.context, { userId: consent.userId, clientId: consent.clientId });
          }),
        },
      ],
      after: [
        ...reset.after,
        {
          matcher: (context) => SIGN_OUT_EVERYWHERE.has(context.path ?? "") || context.path === "/change-password",
          handler: createAuthMiddleware(async (ctx) => {
            const userId = ctx.context.session?.user.id;
            if (!userId || isAPIError(ctx.context.returned)) return;
            if (ctx.path === "/change-password" && (ctx.body as { revokeOtherSessions?: unknown } | undefined)?.revokeOtherSessions !== true) return;
            await revokeOAuthTokens(ctx.context.adapter, userId);
            notifyUserChangedFromHook(ctx.context, userId);
          }),
        },
        {
          matcher: (context) => context.path === CONSENT,
          handler: createAuthMiddleware(async (ctx) => {
            const userId = ctx.context.session?.user.id;
            if (!userId || (ctx.body as { accept?: unknown } | undefined)?.accept !== true || !issuedCode(ctx.context.returned)) return;
            const clientId = await consentedClient(ctx);
            if (!clientId) return;
            const [client] = await clientsNamed(ctx.context.adapter, [clientId]);
            const consent = await ctx.context.adapter.findOne<{ scopes: string[] }>({
              model: "oauthConsent",
              where: [
                { field: "userId", value: userId },
                { field: "clientId", value: clientId },
              ],
            });
            record({
              userId,
              event: "oauth.consent",
              actor: "session",
              outcome: "ok",
              ...requestOrigin(ctx.headers),
              detail: { client: client!.name.slice(0, 100), clientId, scopes: (consent?.scopes ?? []).join(" ").slice(0, 200) },
            });
          }),
        },
        {
          matcher: (context) => context.path === DELETE_CONSENT,
          handler: createAuthMiddleware(async (ctx) => {
            const consent = deleting.get(ctx.context);
            deleting.delete(ctx.context);
            if (!consent || isAPIError(ctx.context.returned)) return;
            await revokeOAuthTokens(ctx.context.adapter, consent.userId, consent.clientId);
            const [client] = await clientsNamed(ctx.context.adapter, [consent.clientId]);
            record(revokedEntry(consent.userId, client!, "owner", "session", requestOrigin(ctx.headers)));
            notifyUserChangedFromHook(ctx.context, consent.userId);
          }),
        },
      ],
    },
  };
}

/** Whether the consent endpoint's answer sends the browser back to the client with a code. */
function issuedCode(returned: unknown): boolean {
  const answer = returned as { url?: unknown; redirect_uri?: unknown } | null | undefined;
  const url = answer?.url ?? answer?.redirect_uri;
  if (typeof url !== "string") return false;
  try {
    return new URL(url).searchParams.has("code");
  } catch {
    return false;
  }
}

/** The client of the authorization request the consent answered: the provider's own (verified) state. */
async function consentedClient(ctx: HookContext): Promise<string | null> {
  const state = await getOAuthProviderState().catch(() => null);
  const query = state?.query ?? (ctx.body as { oauth_query?: unknown } | undefined)?.oauth_query;
  return typeof query === "string" ? new URLSearchParams(query).get("client_id") : null;
}
