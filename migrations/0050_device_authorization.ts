import { sql, type Kysely } from "kysely";

/**
 * better-auth's `deviceCode` table for RFC 8628 device authorization, as its migration API compiled it
 * for 1.7.25 (`getMigrations(...).compileMigrations()` with src/plugins/host/device-grant.ts), including
 * the grant's columns: what the device said about itself and where it asked from, shown to the owner
 * before approving. Only `userId` gained a foreign key, so a deleted user's pending codes go with them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table "deviceCode" (
    "id" text not null primary key,
    "deviceCode" text not null,
    "userCode" text not null,
    "userId" text references "user" ("id") on delete cascade,
    "expiresAt" timestamptz not null,
    "status" text not null,
    "lastPolledAt" timestamptz,
    "pollingInterval" integer,
    "clientId" text,
    "scope" text,
    "deviceName" text,
    "devicePlatform" text,
    "deviceVersion" text,
    "requestIp" text,
    "requestedAt" timestamptz
  )`.execute(db);
  await sql`create unique index "deviceCode_deviceCode_uidx" on "deviceCode" ("deviceCode")`.execute(db);
  await sql`create unique index "deviceCode_userCode_uidx" on "deviceCode" ("userCode")`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table "deviceCode"`.execute(db);
}
