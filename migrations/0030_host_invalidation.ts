import type { Kysely } from "kysely";
import { createNotifyTriggers, dropNotifyTriggers, type NotifyTrigger } from "./notify-triggers.js";

/**
 * Every change that can make a device credential or a device's ownership stale notifies the
 * `tether_host_invalidate` channel, so each replica drops what it cached (src/plugins/host/device-cache.ts)
 * whoever made the change: a revoke on another replica, an admin's SQL, a cascade.
 * Payloads: `d:<device id>` (device revoked, re-keyed, renamed, moved or deleted) and `u:<user id>`
 * (owner deactivated, reactivated or deleted). `last_seen_at`, `tools` and `roots` writes do not notify.
 */
const triggers: NotifyTrigger[] = [
  {
    trigger: "host_device_invalidate",
    fn: "tether_notify_host_device",
    events: "update of revoked_at, user_id, token_hash, name or delete",
    table: "host_device",
    prefix: "d:",
    column: "id",
  },
  {
    trigger: "host_owner_invalidate",
    fn: "tether_notify_host_owner",
    events: `update of "deactivatedAt" or delete`,
    table: `"user"`,
    prefix: "u:",
    column: "id",
  },
];

export async function up(db: Kysely<unknown>): Promise<void> {
  await createNotifyTriggers(db, "tether_host_invalidate", triggers);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await dropNotifyTriggers(db, triggers);
}
