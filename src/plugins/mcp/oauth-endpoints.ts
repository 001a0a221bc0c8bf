import { getOAuthProviderApi, type OAuthOptions, type Scope } from "@better-auth/oauth-provider";
import type { BetterAuthPlugin } from "better-auth";
import { createAuthEndpoint, createAuthMiddleware, isAPIError } from "better-auth/api";
import { constantTimeEqual, makeSignature } from "better-auth/crypto";
import type { ActivityEntry } from "../activity/events.js";
import { revokedEntry, revokeOAuthGrants, revokeOAuthTokens } from "./oauth-revocation.js";

/**
 * Our better-auth plugin beside the OAuth provider (oauth.ts composes them): hooks that adjust the
 * provider's registration and revocation to what MCP clients and RFC 7009 expect, and server-only
 * endpoints (no HTTP route) for token validation with the provider's own code and the owner's grants
 * (the consent page's client, the settings page's list and its revoke button).
 */

export const VERIFIER_ID = "tether-mcp-oauth";

type Context = { body?: unknown };
const bodyOf = (ctx: Context) => (ctx.body ?? {}) as Record<string, unknown>;
const serverOnly = { method: "POST", metadata: { SERVER_ONLY: true } } as const;

export function verifierPlugin(resolved: OAuthOptions<Scope[]>, record: (entry: ActivityEntry) => void) {
  return {
    id: VERIFIER_ID,
    hooks: { before: [nativeLoopbackClients], after: [invalidTokenRevoked] },
    endpoints: { ...tokenEndpoints(resolved), ...grantEndpoints(record) },
  } satisfies BetterAuthPlugin;
}

/**
 * MCP clients register loopback redirect URIs (http://127.0.0.1:PORT/callback) without naming an
 * application type; the provider would default them to "web", which forbids loopback. They are
 * native apps (RFC 8252), so say so for them.
 */
const nativeLoopbackClients = {
  matcher: (ctx: { path?: string }) => ctx.path === "/oauth2/register",
  handler: createAuthMiddleware(async (ctx) => {
    const body = bodyOf(ctx);
    const uris = body.redirect_uris;
    if (body.application_type !== undefined || !Array.isArray(uris) || uris.length === 0 || !uris.every(isLoopbackHttp)) return;
    return { context: { body: { ...body, application_type: "native" } } };
  }),
};

/**
 * RFC 7009 §2.2: an invalid token (unknown, expired, already revoked) is not an error, and
 * the client cannot act on the difference. The provider answers 400 invalid_request for each
 * of those once the client is authenticated; the request's own faults stay errors: no token,
 * a malformed Authorization header (both invalid_request before any token is looked at), and
 * every client failure (invalid_client), unsupported_token_type and server errors.
 */
const invalidTokenRevoked = {
  matcher: (ctx: { path?: string }) => ctx.path === "/oauth2/revoke",
  handler: createAuthMiddleware(async (ctx) => {
    const returned = ctx.context.returned;
    if (!isAPIError(returned) || returned.statusCode !== 400 || (returned.body as { error?: unknown } | undefined)?.error !== "invalid_request") return;
    const token = bodyOf(ctx).token;
    const authorization = ctx.headers?.get("authorization");
    if (typeof token !== "string" || token.trim() === "" || (authorization && !/^basic\s/i.test(authorization))) return;
    // A Response, because an after hook can replace the body but not the status of an error.
    return new Response(null, { status: 200, headers: { "content-type": "application/json" } });
  }),
};

/** Validating an access token, and reading the signed authorization request a consent page shows. */
function tokenEndpoints(resolved: OAuthOptions<Scope[]>) {
  return {
    validateMcpAccessToken: createAuthEndpoint("/tether/mcp/access-token", serverOnly, async (ctx) => {
      const { token } = bodyOf(ctx);
      if (typeof token !== "string") return { active: false };
      try {
        return await getOAuthProviderApi(ctx, resolved).validateAccessToken(token);
      } catch {
        return { active: false };
      }
    }),
    mcpConsentRequest: createAuthEndpoint("/tether/mcp/consent-request", serverOnly, async (ctx) => {
      const { signedQuery } = bodyOf(ctx);
      return verifiedAuthorizationQuery(typeof signedQuery === "string" ? signedQuery : "", ctx.context.secret);
    }),
  };
}

/** The owner's grants: a client's name, the list of clients let in, revoking one, and revoking every token. */
function grantEndpoints(record: (entry: ActivityEntry) => void) {
  return {
    mcpOAuthClient: createAuthEndpoint("/tether/mcp/client", serverOnly, async (ctx) => {
      const client = await ctx.context.adapter.findOne<{ clientId: string; name: string | null; uri: string | null }>({
        model: "oauthClient",
        where: [{ field: "clientId", value: String(bodyOf(ctx).clientId) }],
      });
      return client ? { clientId: client.clientId, name: client.name, uri: client.uri } : null;
    }),
    mcpOAuthGrants: createAuthEndpoint("/tether/mcp/grants", serverOnly, async (ctx) => {
      const userId = String(bodyOf(ctx).userId);
      const consents = await ctx.context.adapter.findMany<{ clientId: string; scopes: string[]; createdAt: Date }>({
        model: "oauthConsent",
        where: [{ field: "userId", value: userId }],
      });
      const grants: McpGrant[] = [];
      for (const consent of consents) {
        const client = await ctx.context.adapter.findOne<{ name: string | null }>({
          model: "oauthClient",
          where: [{ field: "clientId", value: consent.clientId }],
        });
        grants.push({ clientId: consent.clientId, name: client?.name ?? consent.clientId, scopes: consent.scopes, grantedAt: new Date(consent.createdAt) });
      }
      return grants;
    }),
    revokeMcpOAuthGrant: createAuthEndpoint("/tether/mcp/revoke-grant", serverOnly, async (ctx) => {
      const userId = String(bodyOf(ctx).userId);
      // Every token of the grant, access and refresh: the client's next /mcp request is refused.
      const revoked = await revokeOAuthGrants(ctx.context.adapter, userId, String(bodyOf(ctx).clientId));
      for (const client of revoked) record(revokedEntry(userId, client, "owner", "session"));
      return { revoked: revoked.length > 0 };
    }),
    revokeMcpOAuthTokens: createAuthEndpoint("/tether/mcp/revoke-tokens", serverOnly, async (ctx) => {
      // Signing a user out everywhere from outside better-auth's endpoints (the admin's button).
      await revokeOAuthTokens(ctx.context.adapter, String(bodyOf(ctx).userId));
      return { revoked: true };
    }),
  };
}

/** A client the owner let use their devices. */
export interface McpGrant {
  clientId: string;
  name: string;
  scopes: string[];
  grantedAt: Date;
}

/** An authorization request as the provider signed it for the consent page. */
export interface ConsentRequest {
  clientId: string;
  scope: string | null;
  redirectURI: string | null;
}

/**
 * The request in a consent page's query, when the provider's signature over it holds and has not
 * expired; null otherwise. The provider signs the query it redirects to the consent page (HMAC over
 * its parameters sorted by name, then value, without `sig`; `exp` in seconds) and checks it again
 * when the decision is posted; the page checks it before showing anything, so what it shows is what
 * the decision applies to. Checked here the same way the provider checks it: should its scheme
 * change, valid requests are refused (and the OAuth test fails), never the other way round.
 */
async function verifiedAuthorizationQuery(query: string, secret: string): Promise<ConsentRequest | null> {
  const params = new URLSearchParams(query);
  const signatures = params.getAll("sig");
  params.delete("sig");
  const canonical = new URLSearchParams(
    [...params].sort(([keyA, valueA], [keyB, valueB]) => (keyA < keyB ? -1 : keyA > keyB ? 1 : valueA < valueB ? -1 : valueA > valueB ? 1 : 0)),
  );
  const expected = await makeSignature(canonical.toString(), secret);
  const expiresAt = Number(params.get("exp")) * 1000;
  if (signatures.length !== 1 || !constantTimeEqual(signatures[0]!, expected) || !(expiresAt >= Date.now())) return null;
  const clientId = params.get("client_id");
  return clientId ? { clientId, scope: params.get("scope"), redirectURI: params.get("redirect_uri") } : null;
}

function isLoopbackHttp(uri: unknown): boolean {
  try {
    const url = new URL(String(uri));
    return url.protocol === "http:" && ["localhost", "127.0.0.1", "[::1]"].includes(url.hostname);
  } catch {
    return false;
  }
}
