import type { SessionRow, UserRow } from "../../db/schema.js";
import type { StoredApiToken } from "./api-tokens.js";
import { InvalidatedCache, type InvalidatedCacheOptions } from "../../db/invalidated-cache.js";

/** What a cached session token resolves to (resolve-session.ts's `CookieSession`). */
export interface CachedSession {
  user: UserRow;
  session: SessionRow;
}

/** What a cached API token resolves to: the token as stored (api-tokens.ts). */
export type CachedApiToken = StoredApiToken;

export type AuthCacheOptions = InvalidatedCacheOptions;

/**
 * In-process cache of resolved sessions (by session token) and API tokens (by token hash), so a
 * request normally costs no query. The database notifies every change to a session, user or token
 * (migration 0003_session_invalidation), and `invalidate` drops the entry before the next request can
 * see it; when it may serve and store is `InvalidatedCache`'s.
 */
export class AuthCache extends InvalidatedCache {
  private readonly sessions = this.table<CachedSession>();
  private readonly tokens = this.table<CachedApiToken>();

  getSession(token: string): CachedSession | undefined {
    return this.read(this.sessions, token);
  }

  storeSession(token: string, value: CachedSession, version: number): void {
    if (this.write(this.sessions, token, value, value.user.id, version)) deepFreeze(value);
  }

  getToken(hash: string): CachedApiToken | undefined {
    return this.read(this.tokens, hash);
  }

  storeToken(hash: string, value: CachedApiToken, version: number): void {
    if (this.write(this.tokens, hash, value, value.user.id, version)) deepFreeze(value);
  }

  /** Applies one notification payload: `s:<session token>`, `u:<user id>` or `t:<token hash>`. */
  invalidate(payload: string): void {
    this.changed();
    const key = payload.slice(2);
    switch (payload.slice(0, 2)) {
      case "s:":
        this.sessions.delete(key);
        break;
      case "t:":
        this.tokens.delete(key);
        break;
      case "u:":
        this.dropUser(key);
        break;
      default:
        this.clear();
    }
  }

  dropSession(token: string): void {
    this.changed();
    this.sessions.delete(token);
  }
}

/** Cached values are shared by every request that hits them, so no handler may change one. */
function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !(value instanceof Date) && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
