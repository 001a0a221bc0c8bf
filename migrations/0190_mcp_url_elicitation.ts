import { sql, type Kysely } from "kysely";

/**
 * URL elicitation at MCP 2025-11-25 (issue 27): a mutate tool called by a client that declared URL-mode
 * elicitation answers the JSON-RPC error -32042 with the proposal's page, and the client retries the same
 * call once the owner is done. That revision's retry carries no state, so the row ties the call (a digest
 * of the user, the credential, the tool and its arguments: `retry_key`) to its proposal until the retry
 * has taken the decision, or until `expires_at` (the proposal's own expiry). `credential` says whose
 * notification stream hears of the decision (`notifications/elicitation/complete`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table mcp_url_elicitation (
    retry_key text primary key,
    user_id text not null references "user" ("id") on delete cascade,
    credential text not null,
    proposal_id text not null references host_proposal ("id") on delete cascade,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null
  )`.execute(db);
  await sql`create index mcp_url_elicitation_user_expires on mcp_url_elicitation (user_id, expires_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists mcp_url_elicitation`.execute(db);
}
