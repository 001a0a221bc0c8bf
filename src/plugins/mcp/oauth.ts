import { oauthProvider } from "@better-auth/oauth-provider";
import type { BetterAuthPlugin } from "better-auth";
import type { Kysely } from "kysely";
import { hashSecret } from "../../crypto/secrets.js";
import type { Database } from "../../db/schema.js";
import type { ActivityEntry } from "../activity/events.js";
import type { Auth } from "../auth/create-auth.js";
import { OFFLINE_ACCESS_SCOPE, SCOPES } from "../session/scopes.js";
import type { McpCaller, OAuthVerifier } from "./credentials.js";
import { VERIFIER_ID, verifierPlugin, type ConsentRequest, type McpGrant } from "./oauth-endpoints.js";
import { oauthRevocation } from "./oauth-revocation.js";
import { cimdPlugin, type CimdOptions } from "./cimd.js";
import * as store from "./store.js";

export type { ConsentRequest, McpGrant };

/**
 * OAuth for MCP clients that cannot paste a token, through better-auth's OAuth 2.1 provider plugin:
 * authorization-server metadata, Client ID Metadata Documents (cimd.ts) beside open dynamic client
 * registration (RFC 7591, as older MCP clients expect),
 * PKCE (always, S256), and access tokens bound to the /mcp resource (RFC 8707) carrying only
 * `host:call`. Tokens are opaque rows, so revoking a grant or a token takes effect on the next request.
 *
 * The pages the provider sends the browser to are ours: `/oauth/sign-in` (hands over to /login and
 * back) and `/oauth/consent` (src/plugins/mcp/pages.ts).
 */

export const OAUTH_PROVIDER_ID = "oauth-provider";
export const OAUTH_LOGIN_PATH = "/oauth/sign-in";
export const OAUTH_CONSENT_PATH = "/oauth/consent";

export interface McpOAuthOptions {
  /** The /mcp endpoint's public URL: the only resource tokens are issued for. */
  resourceURL: string;
  /** Access-token lifetime in seconds (default one hour). */
  accessTokenExpiresIn?: number;
  /** Where consents given and revoked go (the activity log's writer); nowhere when omitted. */
  recordActivity?: (entry: ActivityEntry) => void;
  /** Client ID Metadata Documents (cimd.ts): on by default; `false` turns them off. */
  clientIdMetadataDocuments?: CimdOptions | false;
}

/**
 * The better-auth plugins to compose into `createAuth({ plugins })`: the provider, our verifier and
 * grant endpoints (oauth-endpoints.ts), and what else ends a grant (oauth-revocation.ts).
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
  const record = options.recordActivity ?? (() => {});
  const cimd = options.clientIdMetadataDocuments === false ? [] : [cimdPlugin(options.clientIdMetadataDocuments)];
  return [provider, ...cimd, verifierPlugin(provider.options, record), oauthRevocation(record)];
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
