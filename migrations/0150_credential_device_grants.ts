import { sql, type Kysely } from "kysely";

/**
 * Per-credential device grants (issue 27): an API token (`token:<id>`) or an OAuth client a user
 * consented to (`oauth:<client id>`) limited to chosen devices. The devices are a list in one row, not a
 * row per device: a device revoked or deleted later stays named in the list and matches nothing, so the
 * grant becomes empty — it can never turn into "every device" the way an emptied join table would.
 * No row is today's behaviour: all the owner's devices.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table host_device_grant (
    user_id text not null references "user" ("id") on delete cascade,
    credential text not null,
    device_ids jsonb not null,
    created_at timestamptz not null default now(),
    primary key (user_id, credential)
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists host_device_grant`.execute(db);
}
