import { sql, type Kysely } from "kysely";

/**
 * The audit log is named for what it holds (issue 25): `host_audit` has held the account's events too
 * (sign-ins, password and two-factor changes, tokens, sessions) since 0060_accounts, so it becomes
 * `activity_event`, the table of the activity log, with its indexes. A rename keeps every row, its
 * identity sequence and its foreign keys; nothing is copied.
 */
const INDEXES = [
  ["host_audit_user_at_idx", "activity_event_user_at_idx"],
  ["host_audit_device_id_idx", "activity_event_device_id_idx"],
  ["host_audit_at_idx", "activity_event_at_idx"],
  ["host_audit_event_at_idx", "activity_event_event_at_idx"],
] as const;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_audit rename to activity_event`.execute(db);
  for (const [from, to] of INDEXES) await sql`alter index if exists ${sql.id(from)} rename to ${sql.id(to)}`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const [from, to] of INDEXES) await sql`alter index if exists ${sql.id(to)} rename to ${sql.id(from)}`.execute(db);
  await sql`alter table activity_event rename to host_audit`.execute(db);
}
