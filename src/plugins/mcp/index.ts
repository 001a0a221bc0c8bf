/**
 * `tether/mcp`: a remote MCP server over each user's devices (`/mcp`). Register `mcpPlugin` after the host plugin;
 * put `mcpOAuthPlugins(...)` into `createAuth({ plugins })` for OAuth clients, `mcpPublicPages` beside the public
 * pages and `mcpPages` inside the guarded ones; run `mcpMigrations` after the host's. See docs/mcp.md.
 */
export { mcpPlugin, type McpPluginOptions } from "./mcp-plugin.js";
export { mcpOAuthPlugins, type McpOAuthOptions } from "./oauth.js";
export type { CimdOptions } from "./cimd.js";
export { mcpPages, mcpPublicPages } from "./pages.js";
export type { TaskSettings } from "./tasks.js";
export { createRateLimiter, type RateLimit, type RateLimiter } from "../host/rate-limit.js";
export { mcpMigrations } from "../../../migrations/index.js";
