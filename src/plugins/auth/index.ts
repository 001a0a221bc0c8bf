/**
 * `tether/auth`: the better-auth instance you own (`createAuth`), its Fastify bridge (`authPlugin`, which decorates
 * `fastify.tetherAuth`, `tetherCallAuth`, `tetherEdgeSsoEnabled` and `tetherPasskeysEnabled`), the origin check every
 * state-changing request passes, edge SSO (its counters take a store from `tether/db`), user administration and the
 * auth tables' migrations. See docs/embedding.md.
 */
export { createAuth, type Auth, type CreateAuthOptions, type ResetPasswordMessage } from "./create-auth.js";
export { authPlugin, type AuthPluginOptions, type AuthCall } from "./auth-plugin.js";
export { originGuardPlugin, type OriginGuardOptions } from "./origin-guard.js";
export { edgeSso, type EdgeSsoOptions } from "./edge-sso.js";
export { userAdmin, type UserAdmin, type UserListing } from "./user-admin.js";
export { authMigrations } from "../../../migrations/index.js";
