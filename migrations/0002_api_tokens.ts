import { sql, type Kysely } from "kysely";

/** Personal API tokens (`sk_…`): only a SHA-256 of the value is stored; the hash is the lookup key. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table api_token (
    id text primary key,
    user_id text not null references "user" ("id") on delete cascade,
    name text not null,
    token_hash text not null unique,
    prefix text not null,
    scopes jsonb not null default '[]'::jsonb,
    created_at timestamptz not null default now(),
    last_used_at timestamptz,
    expires_at timestamptz
  )`.execute(db);
  await sql`create index api_token_user_id_idx on api_token (user_id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists api_token`.execute(db);
}
