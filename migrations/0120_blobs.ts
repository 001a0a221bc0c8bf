import { sql, type Kysely } from "kysely";

/**
 * Blobs (issue 28): bytes that move outside a call (a large or binary file read from a device, a file a
 * caller uploads for write_file). The bytes live in the blob store (files under DATA_DIR, or a bucket);
 * this row is what the server knows of them. A blob goes with its owner and its device (`on delete
 * cascade`); the store's files of a row that is gone are removed by the next sweep. `upload_nonce` is the
 * nonce of the one upload URL currently valid: an upload clears it, so a URL is used once.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table host_blob (
    id text primary key,
    user_id text not null references "user" ("id") on delete cascade,
    device_id text references host_device (id) on delete cascade,
    path text,
    size bigint not null,
    digest text not null,
    content_type text not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    completed_at timestamptz,
    upload_nonce text
  )`.execute(db);
  await sql`create index host_blob_user_idx on host_blob (user_id)`.execute(db);
  await sql`create index host_blob_device_idx on host_blob (device_id)`.execute(db);
  await sql`create index host_blob_expiry_idx on host_blob (expires_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists host_blob`.execute(db);
}
