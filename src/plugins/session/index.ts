/**
 * `tether/session`: per-request session resolution (`sessionPlugin`: `request.getSession()`, `requireSession()`,
 * `requireSiteAdmin()`, `fetchSession()`, `getApiToken()` and `fastify.tetherApiTokens`), the API token routes
 * (`/api/tokens`) and the one table of scope names.
 */
export { sessionPlugin, type ApiTokenService, type SessionOptions, type UiSession, type UiUser } from "./session-plugin.js";
export type { CookieSession, ResolvedSession, SessionUser, TokenSession } from "./resolve-session.js";
export { API_TOKEN_PREFIX, type ApiTokenSummary, type CreatedApiToken, type NewApiTokenInput } from "./api-tokens.js";
export { apiTokenRoutes } from "./token-routes.js";
export type { TokenGrantKind, TokenGrants, TokenGrantRegistry } from "./token-grants.js";
export { OFFLINE_ACCESS_SCOPE, SCOPES, type ScopeName } from "./scopes.js";
