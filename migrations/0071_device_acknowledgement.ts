import { sql, type Kysely } from "kysely";

/**
 * A device is "new" until its owner confirms it on /devices (issue 24, "Trust"): `acknowledged_at` is null until
 * then. Devices paired before this migration count as confirmed (at their pairing time): their owners had them
 * already, and flagging every existing device at once would teach owners to wave the marker away.
 * No notification: the device cache (0030) holds nothing this column changes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_device add column acknowledged_at timestamptz`.execute(db);
  await sql`update host_device set acknowledged_at = created_at`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_device drop column acknowledged_at`.execute(db);
}
