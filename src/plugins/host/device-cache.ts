import type { DeviceIdentity } from "./devices.js";

/** The notification channel of migration 0030_host_invalidation. */
export const HOST_INVALIDATION_CHANNEL = "tether_host_invalidate";

interface Entry {
  identity: DeviceIdentity;
  cachedAt: number;
}

/**
 * What a call and a result post would otherwise each ask the database: which device a token
 * belongs to (`byTokenHash`, only tokens that verified) and who owns a device (`owners`, only
 * unrevoked devices). Correctness rests on invalidation, as in the session cache: every revoke,
 * re-key, deletion or owner deactivation notifies `tether_host_invalidate` (`d:<device>`,
 * `u:<user>`), on every replica, and the change's own replica drops the entry before it replies.
 * While the channel is down nothing is served from here, and a read that raced an invalidation
 * (the `version` changed meanwhile) is not stored.
 */
export class DeviceCache {
  private readonly byTokenHash = new Map<string, Entry>();
  private readonly hashOfDevice = new Map<string, string>();
  private readonly owners = new Map<string, Entry>();
  private generation = 0;
  private live = false;
  /** As in the session cache: with a bound, entries are served only while the channel's last proof is this recent. */
  private proofBoundMs: number | null = null;
  private provenAt = 0;

  constructor(
    private readonly maxEntries = 50_000,
    /** A bound on staleness should a notification ever be lost. */
    private readonly maxAgeMs = 5 * 60_000,
  ) {}

  get version(): number {
    return this.generation;
  }

  deviceByTokenHash(hash: string): DeviceIdentity | undefined {
    return this.read(this.byTokenHash, hash);
  }

  ownerOf(deviceId: string): string | undefined {
    return this.read(this.owners, deviceId)?.userId;
  }

  storeToken(hash: string, identity: DeviceIdentity, version: number): void {
    if (!this.writable(version)) return;
    this.bound(this.byTokenHash);
    this.byTokenHash.set(hash, { identity, cachedAt: Date.now() });
    this.hashOfDevice.set(identity.id, hash);
  }

  storeOwner(identity: DeviceIdentity, version: number): void {
    if (!this.writable(version)) return;
    this.bound(this.owners);
    this.owners.set(identity.id, { identity, cachedAt: Date.now() });
  }

  /** Applies one notification payload: `d:<device id>` or `u:<user id>`; anything else clears all. */
  invalidate(payload: string): void {
    const key = payload.slice(2);
    if (payload.startsWith("d:")) this.dropDevice(key);
    else if (payload.startsWith("u:")) this.dropUser(key);
    else this.clear();
  }

  dropDevice(deviceId: string): void {
    this.generation += 1;
    const hash = this.hashOfDevice.get(deviceId);
    if (hash !== undefined) this.byTokenHash.delete(hash);
    this.hashOfDevice.delete(deviceId);
    this.owners.delete(deviceId);
  }

  dropUser(userId: string): void {
    this.generation += 1;
    for (const map of [this.byTokenHash, this.owners]) {
      for (const [key, entry] of map) if (entry.identity.userId === userId) map.delete(key);
    }
  }

  /** The channel is listening: caching may start (see `AuthCache.resume` for the proof bound). */
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

  private get serving(): boolean {
    return this.live && (this.proofBoundMs === null || Date.now() - this.provenAt <= this.proofBoundMs);
  }

  /** The channel is lost: forget everything and serve nothing until it is back. */
  suspend(): void {
    this.live = false;
    this.clear();
  }

  private clear(): void {
    this.generation += 1;
    this.byTokenHash.clear();
    this.hashOfDevice.clear();
    this.owners.clear();
  }

  private writable(version: number): boolean {
    return this.serving && version === this.generation;
  }

  private bound(map: Map<string, Entry>): void {
    if (map.size >= this.maxEntries) map.delete(map.keys().next().value as string);
  }

  private read(map: Map<string, Entry>, key: string): DeviceIdentity | undefined {
    if (!this.serving) return undefined;
    const entry = map.get(key);
    if (!entry) return undefined;
    if (Date.now() - entry.cachedAt > this.maxAgeMs) {
      map.delete(key);
      return undefined;
    }
    return entry.identity;
  }
}
