import { sql, type Kysely } from "kysely";

/**
 * A TOTP code is accepted once (RFC 6238 §5.2): the time step of the last accepted code, kept on the
 * two-factor row it was checked against, so a new secret (two-factor turned off and on again) starts
 * afresh. See src/plugins/auth/totp-replay.ts.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table "twoFactor" add column "lastAcceptedStep" bigint`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table "twoFactor" drop column if exists "lastAcceptedStep"`.execute(db);
}
