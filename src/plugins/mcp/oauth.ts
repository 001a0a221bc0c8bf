import { getOAuthProviderApi, oauthProvider, type OAuthOptions, type Scope } from "@better-auth/oauth-provider";
import type { BetterAuthPlugin } from "better-auth";
import { createAuthEndpoint, createAuthMiddleware } from "better-auth/api";
import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import type { Auth } from "../auth/create-auth.js";
import { HOST_CALL_SCOPE } from "../host/callers.js";
import type { McpCaller, OAuthVerifier } from "./credentials.js";
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
}

/** The two better-auth plugins to compose into `createAuth({ plugins })`. */
export function mcpOAuthPlugins(options: McpOAuthOptions): BetterAuthPlugin[] {
  const provider = oauthProvider({
    loginPage: OAUTH_LOGIN_PATH,
    consentPage: OAUTH_CONSENT_PATH,
    scopes: [HOST_CALL_SCOPE, "offline_access"],
    clientRegistrationDefaultScopes: [HOST_CALL_SCOPE, "offline_access"],
    resources: [options.resourceURL],
    clientRegistrationDefaultResources: [options.resourceURL],
    allowDynamicClientRegistration: true,
    allowUnauthenticatedClientRegistration: true,
    // Opaque tokens in the database, not self-contained JWTs: revocation must work at once.
    disableJwtPlugin: true,
    accessTokenExpiresIn: options.accessTokenExpiresIn ?? 3600,
  });
  const resolved = provider.options as OAuthOptions<Scope[]>;

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
    },
    endpoints: {
      validateMcpAccessToken: createAuthEndpoint("/tether/mcp/access-token", serverOnly, async (ctx) => {
        const { token } = bodyOf(ctx);
        if (typeof token !== "string") return { active: false };
        try {
          return (await getOAuthProviderApi(ctx, resolved).validateAccessToken(token)) as Record<string, unknown>;
        } catch {
          return { active: false };
        }
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
        const { userId, clientId } = bodyOf(ctx);
        const where = [
          { field: "userId", value: String(userId) },
          { field: "clientId", value: String(clientId) },
        ];
        const removed = await ctx.context.adapter.deleteMany({ model: "oauthConsent", where });
        const now = new Date();
        // Every token of the grant, access and refresh: the client's next /mcp request is refused.
        await ctx.context.adapter.updateMany({ model: "oauthAccessToken", where, update: { revoked: now } });
        await ctx.context.adapter.updateMany({ model: "oauthRefreshToken", where, update: { revoked: now } });
        return { revoked: removed > 0 };
      }),
    },
  } satisfies BetterAuthPlugin;
  return [provider as BetterAuthPlugin, verifier];
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
  mcpOAuthClient(input: { body: { clientId: string } }): Promise<{ clientId: string; name: string | null; uri: string | null } | null>;
  mcpOAuthGrants(input: { body: { userId: string } }): Promise<McpGrant[]>;
  revokeMcpOAuthGrant(input: { body: { userId: string; clientId: string } }): Promise<{ revoked: boolean }>;
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
    if (!payload.active || !payload.sub || !audiences.includes(resourceURL) || !scopes.includes(HOST_CALL_SCOPE)) return null;
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
      stillValid: async () => (await check(token)) !== null,
    };
  };
}
