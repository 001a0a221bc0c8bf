import type { CookieSession } from "./resolve-session.js";
import type { UserRow } from "../../db/schema.js";

/** What a cached API token resolves to. */
export interface CachedApiToken {
  tokenId: string;
  scopes: string[];
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  user: UserRow;
}

interface Entry<T> {
  value: T;
  userId: string;
  cachedAt: number;
}

export interface AuthCacheOptions {
  maxEntries?: number;
  /** Even a valid entry is re-read after this long: a bound on staleness if a notification were lost. */
  maxAgeMs?: number;
}

/**
 * In-process cache of resolved sessions (by session token) and API tokens (by token hash), so a
 * request normally costs no query. Correctness rests on invalidation, not on expiry: the database
 * notifies every change to a session, user or token (migration 0003_session_invalidation), and
 * `invalidate` drops the entry before the next request can see it. The cache serves nothing while
 * the notification channel is down, and a read that raced an invalidation is never stored.
 */
export class AuthCache {
  private readonly sessions = new Map<string, Entry<CookieSession>>();
  private readonly tokens = new Map<string, Entry<CachedApiToken>>();
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;
  private generation = 0;
  private live = false;
  /** null: delivery cannot stall (in-process). Otherwise entries are served only while a proof is this recent. */
  private proofBoundMs: number | null = null;
  private provenAt = 0;

  constructor(options: AuthCacheOptions = {}) {
    this.maxEntries = options.maxEntries ?? 50_000;
    this.maxAgeMs = options.maxAgeMs ?? 5 * 60_000;
  }

  /** Take before reading the database; pass to `store*` so a read that raced a change is dropped. */
  get version(): number {
    return this.generation;
  }

  /** Live, and the channel has proven its delivery recently enough (see `prove`). */
  get enabled(): boolean {
    return this.live && (this.proofBoundMs === null || Date.now() - this.provenAt <= this.proofBoundMs);
  }

  getSession(token: string): CookieSession | undefined {
    return this.read(this.sessions, token);
  }

  storeSession(token: string, value: CookieSession, version: number): void {
    this.write(this.sessions, token, value, value.user.id, version);
  }

  getToken(hash: string): CachedApiToken | undefined {
    return this.read(this.tokens, hash);
  }

  storeToken(hash: string, value: CachedApiToken, version: number): void {
    this.write(this.tokens, hash, value, value.user.id, version);
  }

  /** Applies one notification payload: `s:<session token>`, `u:<user id>` or `t:<token hash>`. */
  invalidate(payload: string): void {
    this.generation += 1;
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

  dropUser(userId: string): void {
    this.generation += 1;
    for (const map of [this.sessions, this.tokens] as Map<string, Entry<unknown>>[]) {
      for (const [key, entry] of map) if (entry.userId === userId) map.delete(key);
    }
  }

  dropSession(token: string): void {
    this.generation += 1;
    this.sessions.delete(token);
  }

  /**
   * The channel is listening: caching may start. With a `proofBoundMs`, the channel must keep proving
   * itself (`prove`) or the cache serves nothing once the last proof is older than that: a change
   * committed elsewhere is never served stale for longer than the bound, even if the channel stalls.
   */
  resume(proofBoundMs: number | null = null): void {
    this.clear();
    this.proofBoundMs = proofBoundMs;
    this.provenAt = Date.now();
    this.live = true;
  }

  /** Every change committed before `sentAt` has been delivered to `invalidate`. */
  prove(sentAt: number): void {
    if (sentAt > this.provenAt) this.provenAt = sentAt;
  }

  /** The channel is lost: forget everything and stop caching until it is back. */
  suspend(): void {
    this.live = false;
    this.clear();
  }

  private clear(): void {
    this.generation += 1;
    this.sessions.clear();
    this.tokens.clear();
  }

  private read<T>(map: Map<string, Entry<T>>, key: string): T | undefined {
    if (!this.enabled) return undefined;
    const entry = map.get(key);
    if (!entry) return undefined;
    if (Date.now() - entry.cachedAt > this.maxAgeMs) {
      map.delete(key);
      return undefined;
    }
    return entry.value;
  }

  private write<T>(map: Map<string, Entry<T>>, key: string, value: T, userId: string, version: number): void {
    if (!this.enabled || version !== this.generation) return;
    if (map.size >= this.maxEntries) map.delete(map.keys().next().value as string);
    map.set(key, { value: deepFreeze(value), userId, cachedAt: Date.now() });
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
