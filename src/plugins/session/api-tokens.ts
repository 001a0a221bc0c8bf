import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import { createCredentialVerifier, LastUsedThrottle } from "../../crypto/credential-verifier.js";
import { generateSecret, hashSecret } from "../../crypto/secrets.js";
import { USER_COLUMNS, type ApiTokenRow, type Database, type UserRow } from "../../db/schema.js";
import { camelColumns } from "../../db/camel-columns.js";

export const API_TOKEN_PREFIX = "sk_";

/** What a new token may be: the JSON API's schema and the settings page's form both check these. */
export const API_TOKEN_LIMITS = {
  nameMaxLength: 100,
  maxScopes: 32,
  maxExpiresInDays: 3650,
  /** A scope: lowercase letters, digits and `: _ . -`, starting with a letter. */
  scopePattern: "^[a-z][a-z0-9:_.-]{0,63}$",
} as const;
/** How much of a token's value a list shows (`sk_` plus 6 characters): enough to tell tokens apart. */
const VISIBLE_PREFIX_LENGTH = API_TOKEN_PREFIX.length + 6;
/** last_used_at is written at most this often per token, so verifying is normally read-only. */
const LAST_USED_WRITE_INTERVAL_MS = 60_000;
const lastUsed = new LastUsedThrottle(LAST_USED_WRITE_INTERVAL_MS);
/** A well-formed token: the prefix and 43 base64url characters (32 random bytes). */
const TOKEN_SHAPE = /^sk_[A-Za-z0-9_-]{43}$/;

/** A token as a list shows it: never the secret. */
export interface ApiTokenSummary {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  createdAt: Date;
  lastUsedAt: Date | null;
  expiresAt: Date | null;
}

/** The created-token record: the only time the `sk_…` value is ever returned. */
export interface CreatedApiToken extends ApiTokenSummary {
  token: string;
}

export interface VerifiedApiToken {
  tokenId: string;
  scopes: string[];
  user: UserRow;
}

export interface NewApiTokenInput {
  userId: string;
  name: string;
  scopes?: string[];
  expiresInDays?: number;
}

export function isWellFormedApiToken(value: string): boolean {
  return TOKEN_SHAPE.test(value);
}

export async function createApiToken(db: Kysely<Database>, input: NewApiTokenInput): Promise<CreatedApiToken> {
  const token = generateSecret(API_TOKEN_PREFIX, 32);
  const scopes = [...new Set(input.scopes ?? [])].sort();
  const expiresAt = input.expiresInDays ? new Date(Date.now() + input.expiresInDays * 86_400_000) : null;
  const row = await db
    .insertInto("api_token")
    .values({
      id: randomUUID(),
      user_id: input.userId,
      name: input.name,
      token_hash: hashSecret(token),
      prefix: token.slice(0, VISIBLE_PREFIX_LENGTH),
      scopes: JSON.stringify(scopes),
      expires_at: expiresAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { ...toSummary(row), token };
}

export async function listApiTokens(db: Kysely<Database>, userId: string): Promise<ApiTokenSummary[]> {
  const rows = await db.selectFrom("api_token").selectAll().where("user_id", "=", userId).orderBy("created_at", "desc").execute();
  return rows.map(toSummary);
}

/** Deletes one of the user's tokens; false when the user has no such token. */
export async function revokeApiToken(db: Kysely<Database>, userId: string, tokenId: string): Promise<boolean> {
  const result = await db.deleteFrom("api_token").where("id", "=", tokenId).where("user_id", "=", userId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * One indexed lookup by the hash of the token's value, joined to its user. It returns the row as
 * stored, expired or not: the verifier decides what to do with it.
 */
export async function findApiTokenByHash(db: Kysely<Database>, tokenHash: string): Promise<StoredApiToken | null> {
  const row = await db
    .selectFrom("api_token as t")
    .innerJoin("user as u", "u.id", "t.user_id")
    .select(["t.id as tokenId", "t.scopes as scopes", "t.expires_at as expiresAt", "t.last_used_at as lastUsedAt", ...USER_COLUMNS])
    .where("t.token_hash", "=", tokenHash)
    .executeTakeFirst();
  if (!row) return null;
  const { tokenId, scopes, expiresAt, lastUsedAt, ...user } = row;
  return { tokenId, scopes, expiresAt, lastUsedAt, user };
}

export interface StoredApiToken extends VerifiedApiToken {
  expiresAt: Date | null;
  lastUsedAt: Date | null;
}

/** Records use in the background: last-used is advisory, so a failed write must not fail a request. */
export function markApiTokenUsed(db: Kysely<Database>, tokenId: string, at = new Date()): void {
  db.updateTable("api_token")
    .set({ last_used_at: at })
    .where("id", "=", tokenId)
    .execute()
    .catch(() => {});
}

/**
 * Where verified tokens may be remembered: the session plugin's `AuthCache`, kept correct by notifications.
 * Declared here, by what owns the tokens, so the cache imports this module and not the other way round.
 */
export interface ApiTokenCache {
  readonly version: number;
  getToken(hash: string): StoredApiToken | undefined;
  storeToken(hash: string, value: StoredApiToken, version: number): void;
}

export type ApiTokenVerifier = (value: string) => Promise<VerifiedApiToken | null>;

/**
 * The verifier of `sk_…` values, on the one credential verifier (src/crypto/credential-verifier.ts):
 * well-formed, known (the cache, or one indexed lookup by hash), not expired, and its user not deactivated.
 * The last-used time is written at most once a minute (the one `LastUsedThrottle`, seeded with the stored
 * time). The session plugin builds it with its cache; `verifyApiToken` is the same function without one.
 */
export function createApiTokenVerifier(db: Kysely<Database>, cache?: ApiTokenCache): ApiTokenVerifier {
  const verify = createCredentialVerifier(
    {
      shape: TOKEN_SHAPE,
      find: (hash) => findApiTokenByHash(db, hash),
      refusal: (token: StoredApiToken, now) =>
        token.expiresAt !== null && token.expiresAt.getTime() <= now ? "expired" : token.user.deactivatedAt ? "deactivated" : null,
    },
    cache && {
      get version() {
        return cache.version;
      },
      get: (hash) => cache.getToken(hash),
      store: (hash, value, version) => cache.storeToken(hash, value, version),
    },
  );
  return async (value) => {
    const verdict = await verify(value);
    if (!verdict.ok) return null;
    const { tokenId, scopes, user, lastUsedAt } = verdict.credential;
    const now = Date.now();
    if (lastUsed.due(tokenId, now, lastUsedAt)) markApiTokenUsed(db, tokenId, new Date(now));
    return { tokenId, scopes, user };
  };
}

/** Verifies an `sk_…` value, uncached: what `request.getSession()` accepts, and nothing else. */
export function verifyApiToken(db: Kysely<Database>, value: string): Promise<VerifiedApiToken | null> {
  return createApiTokenVerifier(db)(value);
}

/** A token without scopes is unrestricted; a scoped one carries only its scopes. */
export function tokenAllows(scopes: readonly string[], requiredScope: string | undefined): boolean {
  return requiredScope === undefined || scopes.length === 0 || scopes.includes(requiredScope);
}

function toSummary(row: ApiTokenRow): ApiTokenSummary {
  return camelColumns(row, ["id", "name", "prefix", "scopes", "created_at", "last_used_at", "expires_at"]);
}
