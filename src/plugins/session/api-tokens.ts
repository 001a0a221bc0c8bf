import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import { generateSecret, hashSecret } from "../../crypto/secrets.js";
import { USER_COLUMNS, type ApiTokenRow, type Database, type UserRow } from "../../db/schema.js";

export const API_TOKEN_PREFIX = "sk_";
/** How much of a token's value a list shows (`sk_` plus 6 characters): enough to tell tokens apart. */
const VISIBLE_PREFIX_LENGTH = API_TOKEN_PREFIX.length + 6;
/** last_used_at is written at most this often per token, so verifying is normally read-only. */
const LAST_USED_WRITE_INTERVAL_MS = 60_000;
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
 * stored, expired or not: `isExpired` and `isLastUsedStale` decide what to do with it.
 */
export async function findApiTokenByHash(db: Kysely<Database>, tokenHash: string): Promise<StoredApiToken | null> {
  const row = await db
    .selectFrom("api_token as t")
    .innerJoin("user as u", "u.id", "t.user_id")
    .select([
      "t.id as tokenId",
      "t.scopes as scopes",
      "t.expires_at as expiresAt",
      "t.last_used_at as lastUsedAt",
      ...USER_COLUMNS,
    ])
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

export const isExpired = (token: { expiresAt: Date | null }, now = Date.now()) => token.expiresAt !== null && token.expiresAt.getTime() <= now;

export const isLastUsedStale = (token: { lastUsedAt: Date | null }, now = Date.now()) =>
  token.lastUsedAt === null || now - token.lastUsedAt.getTime() > LAST_USED_WRITE_INTERVAL_MS;

/** Records use in the background: last-used is advisory, so a failed write must not fail a request. */
export function markApiTokenUsed(db: Kysely<Database>, tokenId: string, at = new Date()): void {
  db.updateTable("api_token")
    .set({ last_used_at: at })
    .where("id", "=", tokenId)
    .execute()
    .catch(() => {});
}

/**
 * Verifies an `sk_…` value without a cache: one indexed lookup; the last-used time is written only
 * when it is a minute stale. (The session plugin does the same through its cache.)
 */
export async function verifyApiToken(db: Kysely<Database>, value: string): Promise<VerifiedApiToken | null> {
  if (!isWellFormedApiToken(value)) return null;
  const stored = await findApiTokenByHash(db, hashSecret(value));
  if (!stored || isExpired(stored)) return null;
  if (isLastUsedStale(stored)) markApiTokenUsed(db, stored.tokenId);
  return { tokenId: stored.tokenId, scopes: stored.scopes, user: stored.user };
}

/** A token without scopes is unrestricted; a scoped one carries only its scopes. */
export function tokenAllows(scopes: readonly string[], requiredScope: string | undefined): boolean {
  return requiredScope === undefined || scopes.length === 0 || scopes.includes(requiredScope);
}

function toSummary(row: ApiTokenRow): ApiTokenSummary {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    scopes: row.scopes,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    expiresAt: row.expires_at,
  };
}
