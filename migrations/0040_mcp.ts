import { sql, type Kysely } from "kysely";

/**
 * MCP: the audit log names the credential that made a call (an API token or an OAuth client), and
 * each user decides whether MCP clients may use action tools (off until the owner turns them on).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_audit add column credential text`.execute(db);
  await sql`create table mcp_setting (
    user_id text primary key references "user" ("id") on delete cascade,
    allow_actions boolean not null default false,
    updated_at timestamptz not null default now()
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists mcp_setting`.execute(db);
  await sql`alter table host_audit drop column if exists credential`.execute(db);
}
