/** `tether/session`: per-request session resolution and API tokens. */
export { sessionPlugin, toUiSession, toUiUser, type SessionOptions, type UiSession, type UiUser } from "./session-plugin.js";
export { createSessionResolver, findSessionWithUser, type ResolvedSession, type CookieSession, type TokenSession, type SessionUser } from "./resolve-session.js";
export {
  API_TOKEN_PREFIX,
  createApiToken,
  listApiTokens,
  revokeApiToken,
  verifyApiToken,
  tokenAllows,
  type ApiTokenSummary,
  type CreatedApiToken,
  type VerifiedApiToken,
} from "./api-tokens.js";
export { apiTokenRoutes } from "./token-routes.js";
