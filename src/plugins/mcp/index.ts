/**
 * `tether/mcp`: a remote MCP server over each user's devices. Register `mcpPlugin` after the host
 * plugin; put `mcpSettingsPage` inside the guarded pages; run `mcpMigrations` after the host's.
 */
export { mcpPlugin, type McpPluginOptions } from "./mcp-plugin.js";
export { createMcpServer, type McpServerContext } from "./mcp-server.js";
export { buildCatalog, annotationsFor, LIST_DEVICES, PROPOSAL_STATUS, DEVICE_ARGUMENT } from "./catalog.js";
export { McpAuthError, type McpCaller, type OAuthVerifier } from "./credentials.js";
export { mcpMigrations } from "../../../migrations/index.js";
