import { sql, type Kysely } from "kysely";

/**
 * A proposal's task asks the client for input (issue 27, the tasks extension's `input_required`): a
 * client that declared URL-mode elicitation on the call gets the approval URL as the task's input
 * request, once. `input_url` says the task asks; `input_answered_at` that the client answered (a key is
 * never asked again once answered, as the extension requires), after which the task is `working` until
 * the owner decides.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table mcp_task add column input_url boolean not null default false`.execute(db);
  await sql`alter table mcp_task add column input_answered_at timestamptz`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table mcp_task drop column if exists input_answered_at`.execute(db);
  await sql`alter table mcp_task drop column if exists input_url`.execute(db);
}
