import type { IncomingHttpHeaders } from "node:http";
import type { Kysely } from "kysely";
import { USER_COLUMNS, type Database, type SessionRow, type UserRow } from "../../db/schema.js";
import type { Auth } from "../auth/create-auth.js";
import { bearerToken } from "../../http/bearer.js";
import { toWebHeaders } from "../../http/web-headers.js";
import { createApiTokenVerifier } from "./api-tokens.js";
import type { AuthCache } from "./auth-cache.js";
import { verifySignedCookie } from "./cookie-signature.js";

/** The user as better-auth returns it, with Tether's two fields. */
export type SessionUser = UserRow;

/** What `getSession` returns: `{ user, session }` for a cookie, `{ user, session: null }` for an API token, or (elsewhere) `null`. */
export type CookieSession = { user: SessionUser; session: SessionRow };
export type TokenSession = { user: SessionUser; session: null };
export type ResolvedSession = CookieSession | TokenSession;

/** What one request resolves to, before any `requiredScope` is applied. */
export interface Resolution {
  session: ResolvedSession | null;
  /** The API token's scopes, for a token caller; null otherwise. */
  tokenScopes: string[] | null;
  /** The API token's id, for a token caller (audit logs name the credential). */
  tokenId?: string;
  /** Cookies better-auth set while refreshing or expiring the session; the caller forwards them. */
  setCookies: string[];
}

export interface ResolutionInput {
  /** The session cookie's raw (URL-decoded) value, if the request has one. */
  sessionCookie: string | undefined;
  /**
   * better-auth's signed "don't remember me" cookie (sign-in with `rememberMe: false`), if present:
   * such a session lasts a day and is never extended, so it is never due for refresh.
   */
  dontRememberCookie?: string | undefined;
  authorization: string | undefined;
  /** The request's headers, for the rare cases handed to better-auth (copied as Fetch headers only then). */
  headers: IncomingHttpHeaders;
}

export interface SessionResolverDeps {
  db: Kysely<Database>;
  auth: Auth;
  secret: string;
  expiresInSeconds: number;
  updateAgeSeconds: number;
  /** Optional cache of resolved sessions and tokens, kept correct by database notifications. */
  cache?: AuthCache;
}

const MAX_VERIFIED_COOKIES = 10_000;

const ANONYMOUS: Resolution = Object.freeze({ session: null, tokenScopes: null, setCookies: [] });

/**
 * The hot path of every request. The resolution order: a cookie session (a deactivated user → null,
 * never falling through to a token), else an `Authorization: Bearer sk_…` token, else null. The cookie is verified with node:crypto and
 * looked up in the cache or with one indexed query joining session and user; only a session that is
 * expired or due for refresh goes to better-auth, which extends or deletes it and sets the cookie.
 */
export function createSessionResolver(deps: SessionResolverDeps) {
  const { db, auth, cache } = deps;
  const refreshWindowMs = (deps.expiresInSeconds - deps.updateAgeSeconds) * 1000;

  async function findSession(token: string): Promise<CookieSession | null> {
    const cached = cache?.getSession(token);
    if (cached) return cached;
    const version = cache?.version ?? 0;
    const row = await findSessionWithUser(db, token);
    if (row) cache?.storeSession(token, row, version);
    return row;
  }

  /**
   * The cookie's verdict: a resolution (its session, or anonymous for a deactivated user), or the
   * cookies to forward when it names no live session (no row, or expired), so the token decides.
   */
  async function resolveCookie(input: ResolutionInput, token: string): Promise<Resolution | string[]> {
    const row = await findSession(token);
    if (!row) return [];
    if (row.user.deactivatedAt) return ANONYMOUS;
    const now = Date.now();
    const expired = row.session.expiresAt.getTime() <= now;
    const neverRefreshed = input.dontRememberCookie !== undefined && verifySignedCookie(input.dontRememberCookie, deps.secret) !== null;
    const dueForRefresh = !neverRefreshed && row.session.expiresAt.getTime() - refreshWindowMs <= now;
    if (!expired && !dueForRefresh) return { session: row, tokenScopes: null, setCookies: [] };

    const { headers, response } = await auth.api.getSession({ headers: toWebHeaders(input.headers), returnHeaders: true });
    const setCookies = headers.getSetCookie();
    if (!response) return setCookies;
    const refreshed = {
      user: { ...row.user },
      session: { ...row.session, expiresAt: new Date(response.session.expiresAt), updatedAt: new Date(response.session.updatedAt) },
    };
    return { session: refreshed, tokenScopes: null, setCookies };
  }

  const verifyToken = createApiTokenVerifier(db, cache);

  async function resolveToken(authorization: string): Promise<Resolution> {
    const value = bearerToken(authorization);
    const verified = value === undefined ? null : await verifyToken(value);
    if (!verified) return ANONYMOUS;
    return { session: { user: verified.user, session: null }, tokenScopes: verified.scopes, tokenId: verified.tokenId, setCookies: [] };
  }

  // Cookie values whose signature already checked out: a returning cookie costs a lookup, not an HMAC.
  // Only verified values go in, so this can never accept a forged one; it is bounded, and cleared whole.
  const verifiedCookies = new Map<string, string>();
  const tokenOfCookie = (value: string): string | null => {
    const known = verifiedCookies.get(value);
    if (known !== undefined) return known;
    const token = verifySignedCookie(value, deps.secret);
    if (token !== null) {
      if (verifiedCookies.size >= MAX_VERIFIED_COOKIES) verifiedCookies.clear();
      verifiedCookies.set(value, token);
    }
    return token;
  };

  return async function resolveSession(input: ResolutionInput): Promise<Resolution> {
    const token = input.sessionCookie ? tokenOfCookie(input.sessionCookie) : null;
    let clearCookies: string[] = [];
    if (token) {
      const fromCookie = await resolveCookie(input, token);
      // A deactivated user's cookie resolves to anonymous; it does not fall through to a token.
      if (!Array.isArray(fromCookie)) return fromCookie;
      clearCookies = fromCookie;
    }
    const resolution = input.authorization ? await resolveToken(input.authorization) : ANONYMOUS;
    return clearCookies.length > 0 ? { ...resolution, setCookies: clearCookies } : resolution;
  };
}

export type SessionResolver = ReturnType<typeof createSessionResolver>;

/** Every session column, prefixed: the user's columns share some of the names. */
const SESSION_COLUMNS = [
  "s.id as s_id",
  "s.expiresAt as s_expiresAt",
  "s.token as s_token",
  "s.createdAt as s_createdAt",
  "s.updatedAt as s_updatedAt",
  "s.ipAddress as s_ipAddress",
  "s.userAgent as s_userAgent",
  "s.userId as s_userId",
] as const;

/** One indexed query: the session row by its unique token, joined to its user. */
export async function findSessionWithUser(db: Kysely<Database>, token: string): Promise<CookieSession | null> {
  const query = db.selectFrom("session as s").innerJoin("user as u", "u.id", "s.userId");
  const row = await query
    .select([...SESSION_COLUMNS, ...USER_COLUMNS])
    .where("s.token", "=", token)
    .executeTakeFirst();
  if (!row) return null;
  const {
    s_id: id,
    s_expiresAt: expiresAt,
    s_token,
    s_createdAt: createdAt,
    s_updatedAt: updatedAt,
    s_ipAddress: ipAddress,
    s_userAgent: userAgent,
    s_userId: userId,
    ...user
  } = row;
  return { user, session: { id, expiresAt, token: s_token, createdAt, updatedAt, ipAddress, userAgent, userId } };
}
