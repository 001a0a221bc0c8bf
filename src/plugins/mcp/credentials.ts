import type { FastifyRequest } from "fastify";
import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import { bearerToken } from "../../http/bearer.js";
import { API_TOKEN_PREFIX, tokenAllows, verifyApiToken } from "../session/api-tokens.js";
import { SCOPES } from "../session/scopes.js";
import type { Caller } from "../host/service.js";

/**
 * Who is calling /mcp. Only bearer credentials count: an `sk_` API token allowing `host:call`, or an
 * OAuth access token issued to an MCP client (see oauth.ts). A browser's session cookie is refused, so
 * a page on another site can never drive a user's devices through /mcp.
 */
export interface McpCaller extends Caller {
  /**
   * The one credential this request carries (`token:<id>`, or `oauth-token:<hash>` for an OAuth access
   * token): what the per-credential rate limit and stream cap count.
   */
  credentialKey: string;
  /** Limited to read tools (`SCOPES.hostRead` without `SCOPES.hostCall`): other tools are neither listed nor callable. */
  readOnly: boolean;
  /** Whether the credential still works (re-checked while a notification stream stays open). */
  stillValid(): Promise<boolean>;
}

/** Why a request is refused: RFC 6750's error codes, sent in `WWW-Authenticate`. */
export class McpAuthError extends Error {
  constructor(
    readonly statusCode: 401 | 403,
    readonly error: "invalid_request" | "invalid_token" | "insufficient_scope",
    message: string,
  ) {
    super(message);
    this.name = "McpAuthError";
  }
}

/** Verifies a bearer value that is not an `sk_` token (an OAuth access token); null when it is not valid. */
export type OAuthVerifier = (token: string) => Promise<McpCaller | null>;

export async function authenticate(request: FastifyRequest, db: Kysely<Database>, oauth: OAuthVerifier | undefined): Promise<McpCaller> {
  const bearer = bearerToken(request.headers.authorization);
  if (!bearer) {
    if (request.headers.cookie && (await request.getSession())?.session) {
      throw new McpAuthError(401, "invalid_request", "A browser session cannot use /mcp: send an API token or an OAuth access token as a Bearer credential");
    }
    throw new McpAuthError(401, "invalid_request", `Send an API token with the "${SCOPES.hostCall}" scope, or an OAuth access token, as a Bearer credential`);
  }
  if (bearer.startsWith(API_TOKEN_PREFIX)) return apiTokenCaller(request, db, bearer);
  const caller = oauth ? await oauth(bearer) : null;
  if (!caller) throw new McpAuthError(401, "invalid_token", "This access token is not valid (expired, revoked or unknown)");
  return caller;
}

async function apiTokenCaller(request: FastifyRequest, db: Kysely<Database>, bearer: string): Promise<McpCaller> {
  const session = await request.getSession();
  // The session plugin resolves a cookie before a token: a request carrying both is a browser's.
  if (session?.session) throw new McpAuthError(401, "invalid_request", "A browser session cannot use /mcp: send the request without cookies");
  const token = await request.getApiToken();
  if (!session || !token) throw new McpAuthError(401, "invalid_token", "This API token is not valid (expired, revoked, or its user is deactivated)");
  const readOnly = !tokenAllows(token.scopes, SCOPES.hostCall);
  if (readOnly && !token.scopes.includes(SCOPES.hostRead)) {
    throw new McpAuthError(403, "insufficient_scope", `This API token has neither the "${SCOPES.hostCall}" nor the "${SCOPES.hostRead}" scope`);
  }
  const userId = session.user.id;
  return {
    userId,
    actor: "mcp",
    credential: `token:${token.id}`,
    credentialKey: `token:${token.id}`,
    readOnly,
    // The session plugin's own verifier, uncached: revoked, expired or deactivated fails.
    stillValid: async () => (await verifyApiToken(db, bearer))?.tokenId === token.id,
  };
}
