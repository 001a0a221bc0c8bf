import type { AnnouncedTool } from "../../../protocol/index.js";
import type { PresenceChange } from "../dispatcher.js";
import { CLAIM_SCRIPT, RELEASE_SCRIPT, type PresenceMessage } from "../redis-wire.js";
import type { PresenceListeners } from "./presence-listeners.js";
import type { Replica } from "./redis-replica.js";

/** Which replica holds a device's stream, and the tools the device announced there. */
export interface Holder {
  replica: string;
  userId: string;
  tools: AnnouncedTool[];
}

/**
 * Presence across the cluster. A replica that gets a stream claims the device (a lease key and a
 * numbered broadcast, atomically: redis-wire.ts); every replica mirrors the claims, so `isOnline` and
 * `toolsOf` cost no round trip, and a newer claim elsewhere closes an older stream here (`replaced`).
 */
export class PresenceMirror {
  private readonly holders = new Map<string, Holder>();
  /** The newest presence number applied per device: a late, older message changes nothing. */
  private readonly applied = new Map<string, number>();
  /** This replica's claims, by device: their numbers, once Redis has run them. */
  private readonly claims = new Map<string, Promise<number>>();
  private readonly releases = new Set<Promise<unknown>>();
  private lastRenewal = 0;

  constructor(
    private readonly replica: Replica,
    /** Lease on a device's presence key, renewed by its holder. */
    private readonly leaseMs: number,
    private readonly listeners: PresenceListeners,
  ) {}

  holderOf(deviceId: string): Holder | undefined {
    return this.holders.get(deviceId);
  }

  /** The replicas holding a device's stream, as far as this one knows (liveness watches them). */
  holderReplicas(): string[] {
    return [...this.holders.values()].map((holder) => holder.replica);
  }

  /** A claim or release broadcast by any replica (this one included), applied in the order Redis ran them. */
  apply(message: PresenceMessage): void {
    if ((this.applied.get(message.d) ?? 0) >= message.s) return;
    this.applied.set(message.d, message.s);
    const known = this.holders.get(message.d);
    if (message.on) {
      this.holders.set(message.d, { replica: message.r, userId: message.u, tools: message.t ?? [] });
      if (message.r !== this.replica.id) void this.yieldTo(message).catch(this.replica.report);
      this.listeners.announce({ deviceId: message.d, userId: message.u, online: true });
    } else if (known) {
      this.holders.delete(message.d);
      this.listeners.announce({ deviceId: message.d, userId: message.u, online: false });
    }
  }

  /** A newer claim elsewhere: this replica's stream of the device, if older, gives way. */
  private async yieldTo(message: PresenceMessage): Promise<void> {
    const { local } = this.replica;
    if (!local.isOnline(message.d)) return;
    const mine = (await this.claims.get(message.d)?.catch(() => 0)) ?? 0;
    if (message.s > mine) await local.disconnect(message.d, "replaced", "A newer connection of this device, on another replica, replaced this one");
  }

  /** Claims and releases in Redis follow this replica's own streams: give it the local dispatcher's presence changes. */
  follow(change: PresenceChange): void {
    if (change.online) this.claim(change);
    else this.release(change);
  }

  private claim({ deviceId, userId }: PresenceChange): void {
    const { pub, names, local, id } = this.replica;
    const tools = [...(local.toolsOf(deviceId) ?? [])];
    const body = JSON.stringify({ on: true, d: deviceId, u: userId, r: id, t: tools });
    const claim = pub.eval(CLAIM_SCRIPT, 3, names.device(deviceId), names.sequence, names.presence, body, String(this.leaseMs)).then(Number);
    this.claims.set(deviceId, claim);
    claim.then(
      (seq) => this.apply({ s: seq, on: true, d: deviceId, u: userId, r: id, t: tools }),
      (error: unknown) => {
        this.replica.report(error);
        // Unclaimed, the stream cannot be reached from the other replicas: the device reconnects later.
        if (this.claims.get(deviceId) === claim) void local.disconnect(deviceId, "shutdown", "The server cannot route calls right now; reconnect shortly");
      },
    );
  }

  private release({ deviceId, userId }: PresenceChange): void {
    const { pub, names, id } = this.replica;
    this.claims.delete(deviceId);
    const body = JSON.stringify({ on: false, d: deviceId, u: userId, r: id });
    const release = pub
      .eval(RELEASE_SCRIPT, 3, names.device(deviceId), names.sequence, names.presence, id, body)
      .then((seq) => {
        if (Number(seq) > 0) this.apply({ s: Number(seq), on: false, d: deviceId, u: userId, r: id });
      })
      .catch(this.replica.report)
      .finally(() => this.releases.delete(release));
    this.releases.add(release);
  }

  /** Resolves once this replica's claim of the device has run in Redis, or failed. */
  async claimed(deviceId: string): Promise<void> {
    await this.claims.get(deviceId)?.catch(() => {});
  }

  /** Resolves once the releases already sent have run: a replica shutting down leaves no claim behind. */
  async released(): Promise<void> {
    await Promise.allSettled([...this.releases]);
  }

  /** What every replica already claimed, for a replica that (re)joins. */
  async load(): Promise<void> {
    const { pub, names } = this.replica;
    let cursor = "0";
    do {
      const [next, keys] = await pub.scan(cursor, "MATCH", names.devicePattern, "COUNT", 1000);
      cursor = next;
      if (keys.length === 0) continue;
      for (const value of await pub.mget(...keys)) if (value) this.apply(JSON.parse(value) as PresenceMessage);
    } while (cursor !== "0");
  }

  /** Shows offline the devices whose holder matches (a dead replica's); `forgetAll` when Redis itself is gone. */
  forget(which: (holder: Holder) => boolean): void {
    for (const [deviceId, holder] of [...this.holders]) {
      if (!which(holder)) continue;
      this.holders.delete(deviceId);
      this.listeners.announce({ deviceId, userId: holder.userId, online: false });
    }
  }

  /** Nothing is known any more: the mirror is loaded afresh once Redis is back. */
  forgetAll(): void {
    this.forget(() => true);
    this.applied.clear();
  }

  /** Renews the leases of the devices this replica holds, three times per lease (called every heartbeat). */
  async renewLeases(): Promise<void> {
    if (Date.now() - this.lastRenewal <= this.leaseMs / 3) return;
    this.lastRenewal = Date.now();
    const { pub, names, id } = this.replica;
    const renewal = pub.pipeline();
    for (const [deviceId, holder] of this.holders) if (holder.replica === id) renewal.pexpire(names.device(deviceId), this.leaseMs);
    await renewal.exec();
  }
}
