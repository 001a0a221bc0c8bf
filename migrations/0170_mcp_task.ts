import { sql, type Kysely } from "kysely";

/**
 * MCP tasks (issue 27, the tasks extension of MCP 2026-07-28): a tool call that outlives its request.
 * The row is the task, so any replica answers `tasks/get`: a read call's result is written here when
 * the call ends; a mutate tool's task names its proposal and takes its status from it. Owned by the
 * user and the credential that started it; gone (as if unknown) after `expires_at`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table mcp_task (
    id text primary key,
    user_id text not null references "user" ("id") on delete cascade,
    credential text not null,
    tool text not null,
    proposal_id text,
    status text not null default 'working',
    result jsonb,
    error jsonb,
    poll_interval_ms integer not null,
    run_deadline timestamptz,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    expires_at timestamptz not null
  )`.execute(db);
  await sql`create index mcp_task_expires_at on mcp_task (expires_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists mcp_task`.execute(db);
}
