/** `tether/auth`: the better-auth instance, its Fastify bridge, origin checks, edge SSO and user admin. */
export { createAuth, type Auth, type CreateAuthOptions, type ResetPasswordMessage, SESSION_EXPIRES_IN_SECONDS, SESSION_UPDATE_AGE_SECONDS } from "./create-auth.js";
export { authPlugin, type AuthPluginOptions, type AuthCall } from "./auth-plugin.js";
export { originGuardPlugin, judgeOrigin, type OriginGuardOptions, type OriginVerdict } from "./origin-guard.js";
export { edgeSso, type EdgeSsoOptions } from "./edge-sso.js";
export { redisCounterStorage, redisRateLimitStorage } from "./redis-storage.js";
export { userAdmin, type UserAdmin, type UserListing } from "./user-admin.js";
export { authMigrations } from "../../../migrations/index.js";
