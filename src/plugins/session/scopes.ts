/**
 * Every scope Tether checks, in one table owned by the session plugin (which applies them: a scoped API
 * token without the `requiredScope` a route names is anonymous there). Routes, pages, the host connector,
 * MCP and the example app name scopes through this table, never as string literals.
 *
 * A token without scopes is unrestricted; a cookie session is never scope-checked.
 */
export const SCOPES = {
  /** Site administration (`/api/admin/*`, the admin and activity pages), for a site admin's token. */
  admin: "admin",
  /** Reading one's own account activity (`GET /api/activity`). */
  activity: "activity",
  /** Listing and revoking one's own API tokens (`/api/tokens`); creating one always needs a browser. */
  tokens: "tokens",
  /** Listing devices, calling their tools and proposing changes (`/api/host/*`, `/mcp`, OAuth clients). */
  hostCall: "host:call",
  /** An MCP credential limited to read tools and `list_devices`: nothing it calls changes anything. */
  hostRead: "host:read",
} as const;

/** A scope name from {@link SCOPES}. */
export type ScopeName = (typeof SCOPES)[keyof typeof SCOPES];

/**
 * The OAuth scope for a refresh token (OpenID Connect's `offline_access`): asked for by MCP clients next to
 * `host:call`. It is an OAuth grant's, never an API token's.
 */
export const OFFLINE_ACCESS_SCOPE = "offline_access";
