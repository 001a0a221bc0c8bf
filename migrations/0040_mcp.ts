import { sql, type Kysely } from "kysely";

/**
 * MCP: each user decides whether MCP clients may use action tools (off until the owner turns them on).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table mcp_setting (
    user_id text primary key references "user" ("id") on delete cascade,
    allow_actions boolean not null default false,
    updated_at timestamptz not null default now()
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists mcp_setting`.execute(db);
}
