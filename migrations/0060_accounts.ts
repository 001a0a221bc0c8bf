import { sql, type Kysely } from "kysely";

/**
 * Accounts (issue 14): two-factor and passkeys, as better-auth 1.7.25's migration API compiled them
 * for `twoFactor()` and `@better-auth/passkey` 1.7.6 (`getMigrations(...).compileMigrations()`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table "user" add column "twoFactorEnabled" boolean default false`.execute(db);
  await sql`create table "twoFactor" (
    "id" text not null primary key,
    "secret" text not null,
    "backupCodes" text not null,
    "userId" text not null references "user" ("id") on delete cascade,
    "verified" boolean,
    "failedVerificationCount" integer,
    "lockedUntil" timestamptz
  )`.execute(db);
  await sql`create table "passkey" (
    "id" text not null primary key,
    "name" text,
    "publicKey" text not null,
    "userId" text not null references "user" ("id") on delete cascade,
    "credentialID" text not null,
    "counter" integer not null,
    "deviceType" text not null,
    "backedUp" boolean not null,
    "transports" text,
    "createdAt" timestamptz,
    "aaguid" text
  )`.execute(db);
  await sql`create index "twoFactor_secret_idx" on "twoFactor" ("secret")`.execute(db);
  await sql`create index "twoFactor_userId_idx" on "twoFactor" ("userId")`.execute(db);
  await sql`create index "passkey_userId_idx" on "passkey" ("userId")`.execute(db);
  await sql`create index "passkey_credentialID_idx" on "passkey" ("credentialID")`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists "passkey"`.execute(db);
  await sql`drop table if exists "twoFactor"`.execute(db);
  await sql`alter table "user" drop column if exists "twoFactorEnabled"`.execute(db);
}
