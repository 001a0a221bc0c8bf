import { sql, type Kysely } from "kysely";

/**
 * better-auth's OAuth 2.1 provider tables (`@better-auth/oauth-provider` 1.7.5), as its migration API
 * compiled them (`getMigrations(...).compileMigrations()` with the plugins of src/plugins/mcp/oauth.ts):
 * registered clients, protected resources, consents, and opaque access and refresh tokens (stored hashed).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table "oauthClient" (
    "id" text not null primary key,
    "clientId" text not null unique,
    "clientSecret" text,
    "clientDiscoveryId" text,
    "disabled" boolean,
    "skipConsent" boolean,
    "enableEndSession" boolean,
    "subjectType" text,
    "scopes" jsonb,
    "clientCredentialsScopes" jsonb,
    "userId" text references "user" ("id") on delete cascade,
    "createdAt" timestamptz,
    "updatedAt" timestamptz,
    "name" text,
    "uri" text,
    "icon" text,
    "contacts" jsonb,
    "tos" text,
    "policy" text,
    "softwareId" text,
    "softwareVersion" text,
    "softwareStatement" text,
    "redirectUris" jsonb not null,
    "postLogoutRedirectUris" jsonb,
    "backchannelLogoutUri" text,
    "backchannelLogoutSessionRequired" boolean,
    "tokenEndpointAuthMethod" text,
    "applicationType" text,
    "jwks" text,
    "jwksUri" text,
    "grantTypes" jsonb,
    "responseTypes" jsonb,
    "requirePKCE" boolean,
    "dpopBoundAccessTokens" boolean,
    "referenceId" text,
    "metadata" jsonb
  )`.execute(db);
  await sql`create table "oauthResource" (
    "id" text not null primary key,
    "identifier" text not null unique,
    "name" text not null,
    "accessTokenTtl" integer,
    "refreshTokenTtl" integer,
    "signingAlgorithm" text,
    "signingKeyId" text,
    "allowedScopes" jsonb,
    "customClaims" jsonb,
    "dpopBoundAccessTokensRequired" boolean,
    "disabled" boolean,
    "createdAt" timestamptz,
    "updatedAt" timestamptz,
    "policyVersion" integer,
    "metadata" jsonb
  )`.execute(db);
  await sql`create table "oauthClientResource" (
    "id" text not null primary key,
    "clientId" text not null references "oauthClient" ("clientId") on delete cascade,
    "resourceId" text not null references "oauthResource" ("identifier") on delete cascade,
    "metadata" jsonb,
    "createdAt" timestamptz
  )`.execute(db);
  await sql`create table "oauthRefreshToken" (
    "id" text not null primary key,
    "token" text not null unique,
    "clientId" text not null references "oauthClient" ("clientId") on delete cascade,
    "sessionId" text references "session" ("id") on delete set null,
    "userId" text not null references "user" ("id") on delete cascade,
    "referenceId" text,
    "authorizationCodeId" text,
    "resources" jsonb,
    "requestedUserInfoClaims" jsonb,
    "expiresAt" timestamptz not null,
    "createdAt" timestamptz not null,
    "revoked" timestamptz,
    "rotatedAt" timestamptz,
    "rotationReplayResponse" text,
    "rotationReplayExpiresAt" timestamptz,
    "authTime" timestamptz,
    "confirmation" jsonb,
    "scopes" jsonb not null
  )`.execute(db);
  await sql`create table "oauthAccessToken" (
    "id" text not null primary key,
    "token" text not null unique,
    "clientId" text not null references "oauthClient" ("clientId") on delete cascade,
    "sessionId" text references "session" ("id") on delete set null,
    "userId" text references "user" ("id") on delete cascade,
    "referenceId" text,
    "authorizationCodeId" text,
    "resources" jsonb,
    "requestedUserInfoClaims" jsonb,
    "refreshId" text references "oauthRefreshToken" ("id") on delete cascade,
    "expiresAt" timestamptz not null,
    "createdAt" timestamptz not null,
    "revoked" timestamptz,
    "confirmation" jsonb,
    "scopes" jsonb not null
  )`.execute(db);
  await sql`create table "oauthConsent" (
    "id" text not null primary key,
    "clientId" text not null references "oauthClient" ("clientId") on delete cascade,
    "userId" text references "user" ("id") on delete cascade,
    "referenceId" text,
    "resources" jsonb,
    "requestedUserInfoClaims" jsonb,
    "scopes" jsonb not null,
    "createdAt" timestamptz not null,
    "updatedAt" timestamptz not null
  )`.execute(db);
  await sql`create table "oauthClientAssertion" (
    "id" text not null primary key,
    "expiresAt" timestamptz not null
  )`.execute(db);
  await sql`create index "oauthClient_userId_idx" on "oauthClient" ("userId")`.execute(db);
  await sql`create index "oauthClientResource_clientId_idx" on "oauthClientResource" ("clientId")`.execute(db);
  await sql`create index "oauthClientResource_resourceId_idx" on "oauthClientResource" ("resourceId")`.execute(db);
  await sql`create index "oauthRefreshToken_clientId_idx" on "oauthRefreshToken" ("clientId")`.execute(db);
  await sql`create index "oauthRefreshToken_sessionId_idx" on "oauthRefreshToken" ("sessionId")`.execute(db);
  await sql`create index "oauthRefreshToken_userId_idx" on "oauthRefreshToken" ("userId")`.execute(db);
  await sql`create index "oauthRefreshToken_authorizationCodeId_idx" on "oauthRefreshToken" ("authorizationCodeId")`.execute(db);
  await sql`create index "oauthAccessToken_clientId_idx" on "oauthAccessToken" ("clientId")`.execute(db);
  await sql`create index "oauthAccessToken_sessionId_idx" on "oauthAccessToken" ("sessionId")`.execute(db);
  await sql`create index "oauthAccessToken_userId_idx" on "oauthAccessToken" ("userId")`.execute(db);
  await sql`create index "oauthAccessToken_authorizationCodeId_idx" on "oauthAccessToken" ("authorizationCodeId")`.execute(db);
  await sql`create index "oauthAccessToken_refreshId_idx" on "oauthAccessToken" ("refreshId")`.execute(db);
  await sql`create index "oauthConsent_clientId_idx" on "oauthConsent" ("clientId")`.execute(db);
  await sql`create index "oauthConsent_userId_idx" on "oauthConsent" ("userId")`.execute(db);
  await sql`create unique index "oauthClientResource_clientId_resourceId_uidx" on "oauthClientResource" ("clientId", "resourceId")`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists "oauthClientAssertion"`.execute(db);
  await sql`drop table if exists "oauthConsent"`.execute(db);
  await sql`drop table if exists "oauthAccessToken"`.execute(db);
  await sql`drop table if exists "oauthRefreshToken"`.execute(db);
  await sql`drop table if exists "oauthClientResource"`.execute(db);
  await sql`drop table if exists "oauthResource"`.execute(db);
  await sql`drop table if exists "oauthClient"`.execute(db);
}
