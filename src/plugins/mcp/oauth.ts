import { getOAuthProviderApi, oauthProvider, type OAuthOptions, type Scope } from "@better-auth/oauth-provider";
import type { BetterAuthPlugin } from "better-auth";
import { createAuthEndpoint, createAuthMiddleware, isAPIError } from "better-auth/api";
import { constantTimeEqual, makeSignature } from "better-auth/crypto";
import type { Kysely } from "kysely";
import { hashSecret } from "../../crypto/secrets.js";
import type { Database } from "../../db/schema.js";
import type { ActivityEntry } from "../activity/events.js";
import type { Auth } from "../auth/create-auth.js";
import { OFFLINE_ACCESS_SCOPE, SCOPES } from "../session/scopes.js";
import type { McpCaller, OAuthVerifier } from "./credentials.js";
import { oauthRevocation, revokedEntry, revokeOAuthGrants, revokeOAuthTokens } from "./oauth-revocation.js";
import * as store from "./store.js";

/**
 * OAuth for MCP clients that cannot paste a token, through better-auth's OAuth 2.1 provider plugin:
 * authorization-server metadata, open dynamic client registration (RFC 7591, as MCP clients expect),
 * PKCE (always, S256), and access tokens bound to the /mcp resource (RFC 8707) carrying only
 * `host:call`. Tokens are opaque rows, so revoking a grant or a token takes effect on the next request.
 *
 * The pages the provider sends the browser to are ours: `/oauth/sign-in` (hands over to /login and
 * back) and `/oauth/consent` (src/plugins/mcp/pages.ts).
 */

export const OAUTH_PROVIDER_ID = "oauth-provider";
const VERIFIER_ID = "tether-mcp-oauth";
export const OAUTH_LOGIN_PATH = "/oauth/sign-in";
export const OAUTH_CONSENT_PATH = "/oauth/consent";

export interface McpOAuthOptions {
  /** The /mcp endpoint's public URL: the only resource tokens are issued for. */
  resourceURL: string;
  /** Access-token lifetime in seconds (default one hour). */
  accessTokenExpiresIn?: number;
  /** Where consents given and revoked go (the activity log's writer); nowhere when omitted. */
  recordActivity?: (entry: ActivityEntry) => void;
}

/**
 * The better-auth plugins to compose into `createAuth({ plugins })`: the provider, our verifier and
 * grant endpoints, and what else ends a grant (oauth-revocation.ts).
 */
export function mcpOAuthPlugins(options: McpOAuthOptions): BetterAuthPlugin[] {
  const provider = oauthProvider({
    loginPage: OAUTH_LOGIN_PATH,
    consentPage: OAUTH_CONSENT_PATH,
    scopes: [SCOPES.hostCall, SCOPES.hostRead, OFFLINE_ACCESS_SCOPE],
    clientRegistrationDefaultScopes: [SCOPES.hostCall, OFFLINE_ACCESS_SCOPE],
    // A registering client may also ask for host:read: MCP clients register with every scope the
    // protected-resource metadata lists, and registration refuses a scope outside defaults + allowed.
    clientRegistrationAllowedScopes: [SCOPES.hostRead],
    resources: [options.resourceURL],
    clientRegistrationDefaultResources: [options.resourceURL],
    allowDynamicClientRegistration: true,
    allowUnauthenticatedClientRegistration: true,
    // Opaque tokens in the database, not self-contained JWTs: revocation must work at once.
    disableJwtPlugin: true,
    accessTokenExpiresIn: options.accessTokenExpiresIn ?? 3600,
  });
  const resolved = provider.options as OAuthOptions<Scope[]>;
  const record = options.recordActivity ?? (() => {});

  // Server-only endpoints (no HTTP route): token validation with the provider's own code, and the
  // owner's grants (the consent page's client, the settings page's list and its revoke button).
  const bodyOf = (ctx: { body?: unknown }) => (ctx.body ?? {}) as Record<string, unknown>;
  const serverOnly = { method: "POST", metadata: { SERVER_ONLY: true } } as const;
  const verifier = {
    id: VERIFIER_ID,
    hooks: {
      before: [
        {
          // MCP clients register loopback redirect URIs (http://127.0.0.1:PORT/callback) without naming an
          // application type; the provider would default them to "web", which forbids loopback. They are
          // native apps (RFC 8252), so say so for them.
          matcher: (ctx) => ctx.path === "/oauth2/register",
          handler: createAuthMiddleware(async (ctx) => {
            const body = bodyOf(ctx);
            const uris = body.redirect_uris;
            if (body.application_type !== undefined || !Array.isArray(uris) || uris.length === 0 || !uris.every(isLoopbackHttp)) return;
            return { context: { body: { ...body, application_type: "native" } } };
          }),
        },
      ],
      after: [
        {
          // RFC 7009 §2.2: an invalid token (unknown, expired, already revoked) is not an error, and
          // the client cannot act on the difference. The provider answers 400 invalid_request for each
          // of those once the client is authenticated; the request's own faults stay errors: no token,
          // a malformed Authorization header (both invalid_request before any token is looked at), and
          // every client failure (invalid_client), unsupported_token_type and server errors.
          matcher: (ctx) => ctx.path === "/oauth2/revoke",
          handler: createAuthMiddleware(async (ctx) => {
            const returned = ctx.context.returned;
            if (!isAPIError(returned) || returned.statusCode !== 400 || (returned.body as { error?: unknown } | undefined)?.error !== "invalid_request") return;
            const token = bodyOf(ctx).token;
            const authorization = ctx.headers?.get("authorization");
            if (typeof token !== "string" || token.trim() === "" || (authorization && !/^basic\s/i.test(authorization))) return;
            // A Response, because an after hook can replace the body but not the status of an error.
            return new Response(null, { status: 200, headers: { "content-type": "application/json" } });
          }),
        },
      ],
    },
    endpoints: {
      validateMcpAccessToken: createAuthEndpoint("/tether/mcp/access-token", serverOnly, async (ctx) => {
        const { token } = bodyOf(ctx);
        if (typeof token !== "string") return { active: false };
        try {
          return (await getOAuthProviderApi(ctx, resolved).validateAccessToken(token));
        } catch {
          return { active: false };
        }
      }),
      mcpConsentRequest: createAuthEndpoint("/tether/mcp/consent-request", serverOnly, async (ctx) => {
        const { signedQuery } = bodyOf(ctx);
        return verifiedAuthorizationQuery(typeof signedQuery === "string" ? signedQuery : "", ctx.context.secret);
      }),
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
          const client = await ctx.context.adapter.findOne<{ name: string | null }>({ model: "oauthClient", where: [{ field: "clientId", value: consent.clientId }] });
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
    },
  } satisfies BetterAuthPlugin;
  return [provider, verifier, oauthRevocation(record)];
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
  const canonical = new URLSearchParams([...params].sort(([keyA, valueA], [keyB, valueB]) => (keyA < keyB ? -1 : keyA > keyB ? 1 : valueA < valueB ? -1 : valueA > valueB ? 1 : 0)));
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

/** A client the owner let use their devices. */
export interface McpGrant {
  clientId: string;
  name: string;
  scopes: string[];
  grantedAt: Date;
}

/** The verifier plugin's server-only endpoints, typed (plugins passed as a list lose their types). */
export interface McpOAuthApi {
  validateMcpAccessToken(input: { body: { token: string } }): Promise<Introspection>;
  /** The consent page's request when the provider's signature over `signedQuery` holds; null otherwise. */
  mcpConsentRequest(input: { body: { signedQuery: string } }): Promise<ConsentRequest | null>;
  mcpOAuthClient(input: { body: { clientId: string } }): Promise<{ clientId: string; name: string | null; uri: string | null } | null>;
  mcpOAuthGrants(input: { body: { userId: string } }): Promise<McpGrant[]>;
  revokeMcpOAuthGrant(input: { body: { userId: string; clientId: string } }): Promise<{ revoked: boolean }>;
  /** Revokes every OAuth access and refresh token of the user; consents stay. */
  revokeMcpOAuthTokens(input: { body: { userId: string } }): Promise<{ revoked: boolean }>;
}

export function mcpOAuthApi(auth: Auth): McpOAuthApi {
  return auth.api as unknown as McpOAuthApi;
}

/** Whether the auth instance has the MCP OAuth plugins. */
export function hasMcpOAuth(auth: Auth): boolean {
  return (auth.options.plugins ?? []).some((plugin: { id: string }) => plugin.id === VERIFIER_ID);
}

/** The authorization server's issuer: better-auth's base URL (`<base>/api/auth`). */
export async function oauthIssuer(auth: Auth): Promise<string> {
  return (await auth.$context).baseURL;
}

interface Introspection {
  active?: boolean;
  sub?: string;
  client_id?: string;
  scope?: string;
  aud?: string | string[];
}

/**
 * Verifies an OAuth access token for /mcp: active, issued for this resource, with `host:call`. The
 * audit log names the client (`oauth:<client id>`).
 */
export function oauthVerifier(auth: Auth, db: Kysely<Database>, resourceURL: string): OAuthVerifier {
  const api = mcpOAuthApi(auth);
  const check = async (token: string): Promise<Introspection | null> => {
    const payload = await api.validateMcpAccessToken({ body: { token } });
    const audiences = Array.isArray(payload.aud) ? payload.aud : payload.aud ? [payload.aud] : [];
    const scopes = (payload.scope ?? "").split(" ");
    if (!payload.active || !payload.sub || !audiences.includes(resourceURL)) return null;
    if (!scopes.includes(SCOPES.hostCall) && !scopes.includes(SCOPES.hostRead)) return null;
    // A deactivated owner's grants stop working at once, like their API tokens.
    return (await store.userActive(db, payload.sub)) ? payload : null;
  };
  return async (token): Promise<McpCaller | null> => {
    const payload = await check(token);
    if (!payload) return null;
    return {
      userId: payload.sub!,
      actor: "mcp",
      credential: `oauth:${payload.client_id ?? "unknown"}`,
      credentialKey: `oauth-token:${hashSecret(token).slice(0, 32)}`,
      readOnly: !(payload.scope ?? "").split(" ").includes(SCOPES.hostCall),
      stillValid: async () => (await check(token)) !== null,
    };
  };
}
