import type { Migration } from "kysely/migration";
import * as betterAuth from "./0001_better_auth.js";
import * as apiTokens from "./0002_api_tokens.js";
import * as sessionInvalidation from "./0003_session_invalidation.js";
import * as host from "./0004_host.js";
import * as deactivationEndsSessions from "./0010_deactivation_ends_sessions.js";
import * as hostInvalidation from "./0030_host_invalidation.js";
import * as mcp from "./0040_mcp.js";
import * as oauthProvider from "./0041_oauth_provider.js";
import * as deviceAuthorization from "./0050_device_authorization.js";
import * as accounts from "./0060_accounts.js";

/**
 * Migrations are imported statically (not read from a folder at run time) so they work from the
 * built package and inside bundles. Each plugin exports the ones it needs, so an embedding team can
 * merge them into its own Kysely migrator; names sort in the order they must run, and no two share a
 * number. A database migrated before a rename is brought in line by `migrateToLatest` (see
 * `RENAMED_MIGRATIONS` in src/db/migrate.ts).
 */
export const authMigrations: Record<string, Migration> = {
  "0001_better_auth": betterAuth,
  "0002_api_tokens": apiTokens,
  "0003_session_invalidation": sessionInvalidation,
  "0010_deactivation_ends_sessions": deactivationEndsSessions,
};

/** Two-factor, passkeys, and the audit log's auth events (it extends the host's audit table). */
export const accountMigrations: Record<string, Migration> = {
  "0060_accounts": accounts,
};

/** The device host connector's tables (devices, pairing codes, proposals, audit log, device codes). */
export const hostMigrations: Record<string, Migration> = {
  "0004_host": host,
  "0030_host_invalidation": hostInvalidation,
  "0050_device_authorization": deviceAuthorization,
};

/**
 * The MCP server's additions, after the host's: the audit log's credential, the per-user MCP settings,
 * and better-auth's OAuth provider tables (for MCP clients that sign in with OAuth).
 */
export const mcpMigrations: Record<string, Migration> = {
  "0040_mcp": mcp,
  "0041_oauth_provider": oauthProvider,
};

/** Every migration the example app runs. */
export const allMigrations: Record<string, Migration> = {
  ...authMigrations,
  ...hostMigrations,
  ...mcpMigrations,
  ...accountMigrations,
};
