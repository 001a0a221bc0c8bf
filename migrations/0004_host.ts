import { sql, type Kysely } from "kysely";

/**
 * The device host connector's tables, owned by the example app (the consuming app owns its device
 * registry). Every row belongs to a user and goes when the user goes (`on delete cascade`).
 * Secrets are never stored: pairing codes and device tokens are kept as SHA-256 digests only.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // Devices: one row per (user, device) pair; the row IS the credential, so revoking a device
  // revokes exactly its token. Revoked rows stay (with revoked_at) so the audit log keeps its subject.
  await sql`create table host_device (
    id text primary key,
    user_id text not null references "user" ("id") on delete cascade,
    name text not null,
    platform text not null,
    token_hash text not null unique,
    tools jsonb,
    roots jsonb,
    agent text,
    created_at timestamptz not null default now(),
    last_seen_at timestamptz,
    revoked_at timestamptz
  )`.execute(db);
  await sql`create index host_device_user_id_idx on host_device (user_id)`.execute(db);

  // Pairing codes: the code's first characters are a lookup handle (stored as a digest, unique among
  // live codes) so failed attempts can be counted against the code they aimed at.
  await sql`create table host_pairing_code (
    id text primary key,
    user_id text not null references "user" ("id") on delete cascade,
    handle_hash text not null unique,
    code_hash text not null,
    failed_attempts integer not null default 0,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    used_at timestamptz,
    device_id text references host_device (id) on delete set null
  )`.execute(db);
  await sql`create index host_pairing_code_user_id_idx on host_pairing_code (user_id)`.execute(db);
  await sql`create index host_pairing_code_expires_at_idx on host_pairing_code (expires_at)`.execute(db);

  // Proposals: the stored input is what apply runs; status moves pending → applying → applied |
  // failed, or pending → rejected | expired, each step by an atomic conditional update.
  await sql`create table host_proposal (
    id text primary key,
    user_id text not null references "user" ("id") on delete cascade,
    device_id text not null references host_device (id) on delete cascade,
    tool text not null,
    input jsonb not null,
    diff text not null,
    summary text not null,
    status text not null default 'pending'
      check (status in ('pending', 'applying', 'applied', 'failed', 'rejected', 'expired')),
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    decided_at timestamptz,
    finished_at timestamptz,
    result jsonb,
    error_code text,
    error_message text
  )`.execute(db);
  await sql`create index host_proposal_user_status_idx on host_proposal (user_id, status)`.execute(db);
  await sql`create index host_proposal_device_id_idx on host_proposal (device_id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ["host_proposal", "host_pairing_code", "host_device"]) {
    await sql`drop table if exists ${sql.table(table)}`.execute(db);
  }
}
