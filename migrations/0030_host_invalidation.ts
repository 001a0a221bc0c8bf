import { sql, type Kysely } from "kysely";

/**
 * Every change that can make a device credential or a device's ownership stale notifies the
 * `tether_host_invalidate` channel, so each replica drops what it cached (src/plugins/host/device-cache.ts)
 * whoever made the change: a revoke on another replica, an admin's SQL, a cascade.
 * Payloads: `d:<device id>` (device revoked, re-keyed, renamed, moved or deleted) and `u:<user id>`
 * (owner deactivated, reactivated or deleted). `last_seen_at`, `tools` and `roots` writes do not notify.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create function tether_notify_host_device() returns trigger language plpgsql as $$
    begin
      perform pg_notify('tether_host_invalidate', 'd:' || old.id);
      return null;
    end $$`.execute(db);
  await sql`create function tether_notify_host_owner() returns trigger language plpgsql as $$
    begin
      perform pg_notify('tether_host_invalidate', 'u:' || old.id);
      return null;
    end $$`.execute(db);
  await sql`create trigger host_device_invalidate after update of revoked_at, user_id, token_hash, name or delete on host_device
    for each row execute function tether_notify_host_device()`.execute(db);
  await sql`create trigger host_owner_invalidate after update of "deactivatedAt" or delete on "user"
    for each row execute function tether_notify_host_owner()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger if exists host_owner_invalidate on "user"`.execute(db);
  await sql`drop trigger if exists host_device_invalidate on host_device`.execute(db);
  await sql`drop function if exists tether_notify_host_owner()`.execute(db);
  await sql`drop function if exists tether_notify_host_device()`.execute(db);
}
