import { sql, type Kysely } from "kysely";

/**
 * Any change to a session, a user or an API token notifies the `tether_auth_invalidate` channel, so
 * every app instance drops what it cached for it, whoever made the change (better-auth, an admin, a
 * cascade, or plain SQL). Payloads: `s:<session token>`, `u:<user id>`, `t:<token hash>`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create function tether_notify_session() returns trigger language plpgsql as $$
    begin
      perform pg_notify('tether_auth_invalidate', 's:' || old.token);
      return null;
    end $$`.execute(db);
  await sql`create function tether_notify_user() returns trigger language plpgsql as $$
    begin
      perform pg_notify('tether_auth_invalidate', 'u:' || old.id);
      return null;
    end $$`.execute(db);
  await sql`create function tether_notify_api_token() returns trigger language plpgsql as $$
    begin
      perform pg_notify('tether_auth_invalidate', 't:' || old.token_hash);
      return null;
    end $$`.execute(db);
  await sql`create trigger session_invalidate after update or delete on "session"
    for each row execute function tether_notify_session()`.execute(db);
  await sql`create trigger user_invalidate after update or delete on "user"
    for each row execute function tether_notify_user()`.execute(db);
  await sql`create trigger api_token_invalidate after update of token_hash, scopes, expires_at, user_id or delete on api_token
    for each row execute function tether_notify_api_token()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger if exists api_token_invalidate on api_token`.execute(db);
  await sql`drop trigger if exists user_invalidate on "user"`.execute(db);
  await sql`drop trigger if exists session_invalidate on "session"`.execute(db);
  await sql`drop function if exists tether_notify_api_token()`.execute(db);
  await sql`drop function if exists tether_notify_user()`.execute(db);
  await sql`drop function if exists tether_notify_session()`.execute(db);
}
