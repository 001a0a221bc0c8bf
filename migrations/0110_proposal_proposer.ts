import { sql, type Kysely } from "kysely";

/**
 * A proposal says who proposed it and who decided it (issue 26, "Changes waiting for approval"):
 * `proposer_actor` is the audit log's actor (`session`, `token`, `mcp`, `assistant`),
 * `proposer_credential` the credential behind it (`token:<id>`, `oauth:<client id>`), and
 * `proposer_name` that credential's name when the proposal was made (a token's or an OAuth client's
 * name), kept as it was even when the credential is renamed or deleted. `decided_by` is the actor
 * that approved or rejected it. An index serves the recent decisions /devices lists. Proposals made before this migration take theirs from the audit log.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_proposal
    add column proposer_actor text,
    add column proposer_credential text,
    add column proposer_name text,
    add column decided_by text`.execute(db);
  // "Recent decisions" on /devices: a user's latest decided proposals, newest first.
  await sql`create index host_proposal_decided_user_idx on host_proposal (user_id, (coalesce(finished_at, decided_at, expires_at)) desc, id desc) where status <> 'pending'`.execute(
    db,
  );
  await sql`update host_proposal p set proposer_actor = a.actor, proposer_credential = a.credential
    from activity_event a where a.proposal_id = p.id and a.event = 'propose' and a.outcome = 'ok'`.execute(db);
  await sql`update host_proposal p set decided_by = a.actor
    from activity_event a where a.proposal_id = p.id and a.event in ('approve', 'reject') and a.outcome = 'ok'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists host_proposal_decided_user_idx`.execute(db);
  await sql`alter table host_proposal
    drop column proposer_actor,
    drop column proposer_credential,
    drop column proposer_name,
    drop column decided_by`.execute(db);
}
