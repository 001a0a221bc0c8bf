import { sql, type Kysely } from "kysely";

/**
 * Deactivating a user ends their sessions in the database itself, whoever does it (the admin API,
 * `npm run admin`, or an admin's plain SQL). The session rows are the one source of truth every path
 * reads, better-auth's own endpoints (`get-session`, `update-user`, `change-password`) included, which
 * know nothing of `deactivatedAt`; each deleted row also notifies the session caches (0002).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create function tether_end_sessions_of_deactivated() returns trigger language plpgsql as $$
    begin
      delete from "session" where "userId" = new.id;
      return null;
    end $$`.execute(db);
  await sql`create trigger user_deactivated_ends_sessions after update of "deactivatedAt" on "user"
    for each row when (new."deactivatedAt" is not null and old."deactivatedAt" is null)
    execute function tether_end_sessions_of_deactivated()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger if exists user_deactivated_ends_sessions on "user"`.execute(db);
  await sql`drop function if exists tether_end_sessions_of_deactivated()`.execute(db);
}
