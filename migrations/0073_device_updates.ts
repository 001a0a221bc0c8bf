import { sql, type Kysely } from "kysely";

/**
 * The last update a device reported (`POST /api/host/update-report`): `{ ok, from, to, trigger, code, message,
 * at, receivedAt }`, shown on /devices. One value per device, replaced by the next report; the device's own log
 * keeps the history. Not a column the invalidation triggers watch (0030): a report changes no credential.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_device add column last_update jsonb`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_device drop column last_update`.execute(db);
}
