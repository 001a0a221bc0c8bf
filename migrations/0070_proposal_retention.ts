import { sql, type Kysely } from "kysely";

/**
 * Proposals keep their diff, input and result only for a while (issue 24): a sweep clears them from
 * decided and expired proposals after the retention (`purged_at` says when), so `diff` and `input` may
 * be null; the row, and the audit trail pointing at it, stay. A diff's size is kept beside it so lists
 * can say how large a diff is without reading it. Partial indexes serve what runs often: counting and
 * paging a user's pending proposals, counting a device's, and the sweep's two passes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_proposal
    alter column diff drop not null,
    alter column input drop not null,
    add column diff_bytes integer,
    add column diff_lines integer,
    add column purged_at timestamptz`.execute(db);
  await sql`update host_proposal set
    diff_bytes = octet_length(diff),
    diff_lines = case when diff = '' then 0
      else length(diff) - length(replace(diff, chr(10), '')) + case when right(diff, 1) = chr(10) then 0 else 1 end end`.execute(db);
  await sql`create index host_proposal_pending_user_idx on host_proposal (user_id, created_at, id) where status = 'pending'`.execute(db);
  await sql`create index host_proposal_pending_device_idx on host_proposal (device_id) where status = 'pending'`.execute(db);
  await sql`create index host_proposal_pending_expiry_idx on host_proposal (expires_at) where status = 'pending'`.execute(db);
  await sql`create index host_proposal_unpurged_idx on host_proposal (finished_at) where purged_at is null and finished_at is not null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const index of [
    "host_proposal_unpurged_idx",
    "host_proposal_pending_expiry_idx",
    "host_proposal_pending_device_idx",
    "host_proposal_pending_user_idx",
  ]) {
    await sql`drop index if exists ${sql.id(index)}`.execute(db);
  }
  // A purged proposal has no diff or input left to restore: it keeps an empty one.
  await sql`update host_proposal set diff = coalesce(diff, ''), input = coalesce(input, 'null'::jsonb)`.execute(db);
  await sql`alter table host_proposal
    alter column diff set not null,
    alter column input set not null,
    drop column diff_bytes,
    drop column diff_lines,
    drop column purged_at`.execute(db);
}
