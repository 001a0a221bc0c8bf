import { sql, type Kysely } from "kysely";

/**
 * Accounts (issue 14): two-factor and passkeys, as better-auth 1.7.25's migration API compiled them
 * for `twoFactor()` and `@better-auth/passkey` 1.7.6 (`getMigrations(...).compileMigrations()`), and
 * the audit log grown from the host's into the one log of security events (auth and host alike).
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

  // The audit log holds auth events too. A failed sign-in for an address with no account has no
  // user (user_id null, the attempted address in detail); ip_address and user_agent say where a
  // sign-in came from; detail is a small JSON object of non-secret facts (method, token name, …).
  await sql`alter table host_audit alter column user_id drop not null`.execute(db);
  await sql`alter table host_audit add column ip_address text`.execute(db);
  await sql`alter table host_audit add column user_agent text`.execute(db);
  await sql`alter table host_audit add column detail jsonb`.execute(db);
  await sql`create index host_audit_at_idx on host_audit (at desc)`.execute(db);
  await sql`create index host_audit_event_at_idx on host_audit (event, at desc)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists host_audit_event_at_idx`.execute(db);
  await sql`drop index if exists host_audit_at_idx`.execute(db);
  await sql`delete from host_audit where user_id is null`.execute(db);
  await sql`alter table host_audit drop column detail, drop column user_agent, drop column ip_address`.execute(db);
  await sql`alter table host_audit alter column user_id set not null`.execute(db);
  await sql`drop table if exists "passkey"`.execute(db);
  await sql`drop table if exists "twoFactor"`.execute(db);
  await sql`alter table "user" drop column if exists "twoFactorEnabled"`.execute(db);
}
