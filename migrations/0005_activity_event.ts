import { sql, type Kysely } from "kysely";

/**
 * The activity log: one table for everything a person would want to see happened to their account and
 * devices — sign-ins (failed ones too), password, two-factor, passkey, token and session changes, device
 * tool calls and proposals. It belongs to the auth set because sign-in events are written from the first
 * request, so an app that embeds only the auth plugins has it; `0140_activity_event_host_links` ties its
 * device and proposal columns to the host tables when those exist.
 *
 * Inputs are recorded as a digest (file contents do not belong in a log); `user_id` is null only for a failed
 * sign-in that named no account (the attempted address is in `detail`); `detail` is a small JSON object of
 * non-secret facts (method, token name, …); `credential` names the API token or OAuth client that acted.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table activity_event (
    id bigint generated always as identity primary key,
    user_id text references "user" ("id") on delete cascade,
    device_id text,
    proposal_id text,
    event text not null,
    actor text not null,
    credential text,
    tool text,
    mode text,
    input_digest text,
    outcome text not null,
    error_code text,
    duration_ms integer,
    ip_address text,
    user_agent text,
    detail jsonb,
    at timestamptz not null default now()
  )`.execute(db);
  await sql`create index activity_event_user_at_idx on activity_event (user_id, at desc)`.execute(db);
  await sql`create index activity_event_device_id_idx on activity_event (device_id)`.execute(db);
  await sql`create index activity_event_at_idx on activity_event (at desc)`.execute(db);
  await sql`create index activity_event_event_at_idx on activity_event (event, at desc)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists activity_event`.execute(db);
}
