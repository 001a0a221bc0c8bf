/** One cached value, with the user it belongs to (a user's change drops all of theirs) and when it was read. */
export interface CachedEntry<T> {
  value: T;
  userId: string;
  cachedAt: number;
}

export interface InvalidatedCacheOptions {
  maxEntries?: number;
  /** Even a valid entry is re-read after this long: a bound on staleness if a notification were lost. */
  maxAgeMs?: number;
}

/**
 * An in-process cache whose correctness rests on invalidation, not on expiry: the database notifies every
 * change on a channel (`tetherDbListen`, src/db/notifications.ts), and the subclass turns each payload into
 * dropped entries before the next request can see them. What every such cache must get right lives here:
 * - it serves nothing while the channel is down (`suspend` until `resume`), nor, with a proof bound, once the
 *   channel's last proof of delivery (`prove`) is older than the bound;
 * - a read that raced an invalidation is never stored: callers take `version` before reading the database
 *   and pass it to `write`, which refuses if anything was dropped meanwhile;
 * - it holds at most `maxEntries` per table, oldest out first.
 */
export abstract class InvalidatedCache {
  private readonly tables: Map<string, CachedEntry<unknown>>[] = [];
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;
  private generation = 0;
  private live = false;
  /** null: delivery cannot stall (in-process). Otherwise entries are served only while a proof is this recent. */
  private proofBoundMs: number | null = null;
  private provenAt = 0;

  constructor(options: InvalidatedCacheOptions = {}) {
    this.maxEntries = options.maxEntries ?? 50_000;
    this.maxAgeMs = options.maxAgeMs ?? 5 * 60_000;
  }

  /** Take before reading the database; pass to the store call so a read that raced a change is dropped. */
  get version(): number {
    return this.generation;
  }

  /** Live, and the channel has proven its delivery recently enough (see `prove`). */
  get enabled(): boolean {
    return this.live && (this.proofBoundMs === null || Date.now() - this.provenAt <= this.proofBoundMs);
  }

  /** Applies one notification payload from the channel. */
  abstract invalidate(payload: string): void;

  /** Drops every entry of the user, in every table. */
  dropUser(userId: string): void {
    this.changed();
    for (const table of this.tables) {
      for (const [key, entry] of table) if (entry.userId === userId) table.delete(key);
    }
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

  /** The channel is lost: forget everything and serve nothing until it is back. */
  suspend(): void {
    this.live = false;
    this.clear();
  }

  /** A table of this cache: `dropUser` and `clear` reach it. */
  protected table<T>(): Map<string, CachedEntry<T>> {
    const table = new Map<string, CachedEntry<T>>();
    this.tables.push(table);
    return table;
  }

  /** Something was dropped: a read that started before now must not be stored. */
  protected changed(): void {
    this.generation += 1;
  }

  /** Forgets everything (an unknown payload, or the channel's state changed). */
  protected clear(): void {
    this.changed();
    for (const table of this.tables) table.clear();
  }

  protected read<T>(table: Map<string, CachedEntry<T>>, key: string): T | undefined {
    if (!this.enabled) return undefined;
    const entry = table.get(key);
    if (!entry) return undefined;
    if (Date.now() - entry.cachedAt > this.maxAgeMs) {
      table.delete(key);
      return undefined;
    }
    return entry.value;
  }

  /** Stores unless the cache is off or something changed since `version` was taken; returns whether it did. */
  protected write<T>(table: Map<string, CachedEntry<T>>, key: string, value: T, userId: string, version: number): boolean {
    if (!this.enabled || version !== this.generation) return false;
    if (table.size >= this.maxEntries) table.delete(table.keys().next().value as string);
    table.set(key, { value, userId, cachedAt: Date.now() });
    return true;
  }
}
