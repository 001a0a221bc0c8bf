import { InvalidatedCache } from "../../db/invalidated-cache.js";
import type { DeviceIdentity } from "./devices.js";

/** The notification channel of migration 0030_host_invalidation. */
export const HOST_INVALIDATION_CHANNEL = "tether_host_invalidate";

/**
 * What a call and a result post would otherwise each ask the database: which device a token
 * belongs to (`byTokenHash`, only tokens that verified) and who owns a device (`owners`, only
 * unrevoked devices). Every revoke, re-key, deletion or owner deactivation notifies
 * `tether_host_invalidate` (`d:<device>`, `u:<user>`), on every replica, and the change's own replica
 * drops the entry before it replies; when it may serve and store is `InvalidatedCache`'s.
 */
export class DeviceCache extends InvalidatedCache {
  private readonly byTokenHash = this.table<DeviceIdentity>();
  private readonly owners = this.table<DeviceIdentity>();
  private readonly hashOfDevice = new Map<string, string>();

  deviceByTokenHash(hash: string): DeviceIdentity | undefined {
    return this.read(this.byTokenHash, hash);
  }

  /** The unrevoked device's identity (owner and name), as last read from the database. */
  ownedDevice(deviceId: string): DeviceIdentity | undefined {
    return this.read(this.owners, deviceId);
  }

  storeToken(hash: string, identity: DeviceIdentity, version: number): void {
    if (this.write(this.byTokenHash, hash, identity, identity.userId, version)) this.hashOfDevice.set(identity.id, hash);
  }

  storeOwner(identity: DeviceIdentity, version: number): void {
    this.write(this.owners, identity.id, identity, identity.userId, version);
  }

  /** Applies one notification payload: `d:<device id>` or `u:<user id>`; anything else clears all. */
  invalidate(payload: string): void {
    const key = payload.slice(2);
    if (payload.startsWith("d:")) this.dropDevice(key);
    else if (payload.startsWith("u:")) this.dropUser(key);
    else this.clear();
  }

  dropDevice(deviceId: string): void {
    this.changed();
    const hash = this.hashOfDevice.get(deviceId);
    if (hash !== undefined) this.byTokenHash.delete(hash);
    this.hashOfDevice.delete(deviceId);
    this.owners.delete(deviceId);
  }

  protected override clear(): void {
    super.clear();
    this.hashOfDevice.clear();
  }
}
