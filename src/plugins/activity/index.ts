/**
 * `tether/activity`: the audit log every plugin writes and account activity on it. `auditPlugin` decorates
 * `fastify.tetherAudit` with the app's one batched writer (`createAuditWriter`; the host and MCP plugins need it);
 * `activityPlugin` decorates `fastify.tetherActivity` and serves `GET /api/activity` and `GET /api/admin/activity`
 * (the activity and admin pages need it). `createActivityWriter(auditWriter)` is what `createAuth({ recordActivity })`
 * takes, so sign-in events land in the same log. The tables come from `hostMigrations` (`allMigrations` has all).
 */
export { auditPlugin, createAuditWriter, type AuditPluginOptions, type AuditRow } from "./audit-plugin.js";
export { activityPlugin, type ActivityPluginOptions, type ActivityService } from "./activity-plugin.js";
export { createActivityWriter, type ActivityWriter } from "./writer.js";
export { ACTIVITY_EVENTS, type ActivityActor, type ActivityEntry, type ActivityEvent } from "./events.js";
export type { ActivityPage, ActivityQuery, ActivityView } from "./repository.js";
