import { sql, type Kysely } from "kysely";

/**
 * The activity log (created by the auth set, `0005_activity_event`) names devices and proposals; with the host
 * tables present, those columns become foreign keys, so deleting a device or a proposal deletes its events as it
 * always has, and no event can name a device that never existed.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table activity_event
    add constraint activity_event_device_id_fkey foreign key (device_id) references host_device (id) on delete cascade,
    add constraint activity_event_proposal_id_fkey foreign key (proposal_id) references host_proposal (id) on delete cascade`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table activity_event drop constraint if exists activity_event_proposal_id_fkey, drop constraint if exists activity_event_device_id_fkey`.execute(
    db,
  );
}
