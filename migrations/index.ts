import type { Migration } from "kysely/migration";
import * as betterAuth from "./0001_better_auth.js";
import * as apiTokens from "./0002_api_tokens.js";
import * as sessionInvalidation from "./0003_session_invalidation.js";
import * as host from "./0004_host.js";
import * as activityEvent from "./0005_activity_event.js";
import * as deactivationEndsSessions from "./0010_deactivation_ends_sessions.js";
import * as hostInvalidation from "./0030_host_invalidation.js";
import * as mcp from "./0040_mcp.js";
import * as oauthProvider from "./0041_oauth_provider.js";
import * as deviceAuthorization from "./0050_device_authorization.js";
import * as accounts from "./0060_accounts.js";
import * as deviceAcknowledgement from "./0071_device_acknowledgement.js";
import * as totpReplay from "./0072_totp_replay.js";
import * as proposalRetention from "./0070_proposal_retention.js";
import * as deviceUpdates from "./0073_device_updates.js";
import * as proposalProposer from "./0110_proposal_proposer.js";
import * as deviceToolsOrder from "./0111_device_tools_order.js";
import * as blobs from "./0120_blobs.js";
import * as activityEventHostLinks from "./0140_activity_event_host_links.js";
import * as credentialDeviceGrants from "./0150_credential_device_grants.js";
import * as mcpTask from "./0170_mcp_task.js";
import * as mcpTaskInput from "./0180_mcp_task_input.js";
import * as mcpUrlElicitation from "./0190_mcp_url_elicitation.js";

/**
 * Migrations are imported statically (not read from a folder at run time) so they work from the
 * built package and inside bundles. Each plugin exports the ones it needs, so an embedding team can
 * merge them into its own Kysely migrator; names sort in the order they must run, and no two share a
 * number. A released migration is never renamed or edited (docs/versioning.md).
 */
export const authMigrations: Record<string, Migration> = {
  "0001_better_auth": betterAuth,
  "0002_api_tokens": apiTokens,
  "0003_session_invalidation": sessionInvalidation,
  "0005_activity_event": activityEvent,
  "0010_deactivation_ends_sessions": deactivationEndsSessions,
  // Two-factor and passkeys: createAuth always has better-auth's two-factor plugin; each TOTP code accepted once.
  "0060_accounts": accounts,
  "0072_totp_replay": totpReplay,
};

/** The device host connector's tables (devices, pairing codes, proposals, device codes, blobs, credentials' device grants) and the activity log's links to them. */
export const hostMigrations: Record<string, Migration> = {
  "0004_host": host,
  "0030_host_invalidation": hostInvalidation,
  "0050_device_authorization": deviceAuthorization,
  "0070_proposal_retention": proposalRetention,
  "0071_device_acknowledgement": deviceAcknowledgement,
  "0073_device_updates": deviceUpdates,
  "0110_proposal_proposer": proposalProposer,
  "0111_device_tools_order": deviceToolsOrder,
  "0120_blobs": blobs,
  "0140_activity_event_host_links": activityEventHostLinks,
  "0150_credential_device_grants": credentialDeviceGrants,
};

/**
 * The MCP server's additions, after the host's: the per-user MCP settings, its tasks, the 2025-11-25
 * calls waiting for their retry after a URL elicitation, and better-auth's OAuth provider tables (for MCP
 * clients that sign in with OAuth).
 */
export const mcpMigrations: Record<string, Migration> = {
  "0040_mcp": mcp,
  "0041_oauth_provider": oauthProvider,
  "0170_mcp_task": mcpTask,
  "0180_mcp_task_input": mcpTaskInput,
  "0190_mcp_url_elicitation": mcpUrlElicitation,
};

/** Every migration the example app runs. */
export const allMigrations: Record<string, Migration> = {
  ...authMigrations,
  ...hostMigrations,
  ...mcpMigrations,
};
