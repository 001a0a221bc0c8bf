import { hashSecret } from "./secrets.js";

/**
 * The one way a bearer credential is verified, for `sk_` API tokens (session/api-tokens.ts) and `dt_` device
 * tokens (host/devices.ts): a value of the wrong shape is refused without a query; otherwise it is looked up
 * by its SHA-256 digest (`hashSecret`), in the cache or by one indexed query, and the stored credential is
 * refused when expired, revoked, or its owner deactivated. Only digests are stored and compared, and the
 * lookup is by the digest itself, so there is no secret comparison to make constant-time: an attacker who
 * times the index learns about digests of values they chose, never about a stored one.
 */
export interface CredentialKind<T, Refusal extends string> {
  /** A well-formed value: its prefix and length (e.g. `sk_` and 43 base64url characters). */
  shape: RegExp;
  /** The stored credential whose digest this is, with its owner's state; null when none. */
  find(hash: string): Promise<T | null>;
  /** Why a stored credential is refused now (e.g. `"revoked"`), or null when it may be used. */
  refusal(stored: T, now: number): Refusal | null;
}

/**
 * Where verified credentials may be remembered (an `InvalidatedCache`: kept correct by database notifications,
 * and never storing a read that raced an invalidation, which is what `version` is for).
 */
export interface CredentialCache<T> {
  readonly version: number;
  get(hash: string): T | undefined;
  store(hash: string, value: T, version: number): void;
}

export type CredentialVerdict<T, Refusal extends string> = { ok: true; credential: T } | { ok: false; reason: "invalid" | Refusal };

export function createCredentialVerifier<T, Refusal extends string>(
  kind: CredentialKind<T, Refusal>,
  cache?: CredentialCache<T>,
): (value: string) => Promise<CredentialVerdict<T, Refusal>> {
  return async (value) => {
    if (!kind.shape.test(value)) return { ok: false, reason: "invalid" };
    const hash = hashSecret(value);
    const now = Date.now();
    const cached = cache?.get(hash);
    if (cached !== undefined) {
      const refusal = kind.refusal(cached, now);
      return refusal === null ? { ok: true, credential: cached } : { ok: false, reason: refusal };
    }
    const version = cache?.version ?? 0;
    const found = await kind.find(hash);
    if (found === null) return { ok: false, reason: "invalid" };
    const refusal = kind.refusal(found, now);
    if (refusal !== null) return { ok: false, reason: refusal };
    // Only credentials that verify are remembered; one that later expires is refused from the cache as above.
    cache?.store(hash, found, version);
    return { ok: true, credential: found };
  };
}

/**
 * The one last-used throttle: a credential's "last used" (an API token's `last_used_at`, a device's
 * `last_seen_at`) is advisory, so it is written at most once per `intervalMs` per credential per process,
 * and verifying is normally read-only. Bounded: past `maxEntries` credentials the least recently written
 * is forgotten (the cost is one early write for it, never unbounded memory).
 */
export class LastUsedThrottle {
  private readonly writtenAt = new Map<string, number>();

  constructor(
    private readonly intervalMs: number,
    private readonly maxEntries = 50_000,
  ) {}

  /**
   * Whether `id`'s last-used time is due to be written now; when it is, it is taken as written. `known` is the
   * last-used time as stored, if the caller read it anyway (so a restart does not write every credential again).
   */
  due(id: string, now = Date.now(), known?: Date | null): boolean {
    const last = this.writtenAt.get(id) ?? known?.getTime() ?? Number.NEGATIVE_INFINITY;
    if (now - last < this.intervalMs) return false;
    this.written(id, now);
    return true;
  }

  /** Takes `id`'s last-used time as written at `now` (by a write that is never skipped, e.g. a device connecting). */
  written(id: string, now = Date.now()): void {
    this.writtenAt.delete(id);
    this.writtenAt.set(id, now);
    if (this.writtenAt.size > this.maxEntries) this.writtenAt.delete(this.writtenAt.keys().next().value!);
  }
}
