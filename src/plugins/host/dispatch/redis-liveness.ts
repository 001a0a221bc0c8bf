import { dispatchUnavailable, disconnected } from "./device-call-error.js";
import type { PresenceMirror } from "./redis-presence.js";
import type { Replica } from "./redis-replica.js";
import type { CallRouter } from "./redis-routing.js";

/**
 * Whether this replica, and the others, are alive. Each replica renews a heartbeat key; when another's
 * expires, its devices show offline and the calls waiting on it fail (`DEVICE_DISCONNECTED`, within
 * about 3 heartbeats). While Redis itself is unreachable this replica is down: calls fail at once
 * (`DISPATCH_UNAVAILABLE`) and its streams close (`shutdown`) so devices reconnect once Redis is
 * back; it comes up again by itself.
 */
export class Liveness {
  private isUp = false;
  private closing = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly replica: Replica,
    /** How often this replica proves it is alive; one silent for 3× this is dead. */
    private readonly heartbeatMs: number,
    private readonly presence: PresenceMirror,
    private readonly router: CallRouter,
  ) {
    this.timer = setInterval(() => void this.heartbeat().catch(replica.report), heartbeatMs);
    this.timer.unref();
    for (const redis of [replica.pub, replica.sub]) {
      redis.on("ready", () => void this.goUp());
      redis.on("close", () => this.goDown());
      redis.on("error", (error: unknown) => replica.report(error));
    }
  }

  get up(): boolean {
    return this.isUp;
  }

  /** Both connections are ready: announce this replica, listen, and load what the others claimed. */
  private async goUp(): Promise<void> {
    const { pub, sub, names, id } = this.replica;
    if (this.isUp || this.closing || pub.status !== "ready" || sub.status !== "ready") return;
    try {
      await pub.set(names.replica(id), "1", "PX", this.heartbeatMs * 3);
      await sub.subscribe(names.presence, names.control, names.inbox(id));
      await this.presence.load();
      this.isUp = true;
    } catch (error) {
      this.replica.report(error);
    }
  }

  private goDown(): void {
    if (!this.isUp) return;
    this.isUp = false;
    this.router.failWhere(() => true, dispatchUnavailable);
    void this.replica.local.closeAll();
    this.presence.forgetAll();
  }

  private async heartbeat(): Promise<void> {
    if (!this.isUp) return this.goUp();
    const { pub, names, id } = this.replica;
    await pub.set(names.replica(id), "1", "PX", this.heartbeatMs * 3);
    const others = [...new Set([...this.presence.holderReplicas(), ...this.router.awaitedReplicas()])].filter((replica) => replica !== id);
    if (others.length > 0) {
      const alive = await pub.mget(...others.map((replica) => names.replica(replica)));
      others.forEach((replica, i) => alive[i] === null && this.bury(replica));
    }
    await this.presence.renewLeases();
  }

  /** A replica whose heartbeat expired: its streams are gone, and so are the calls waiting on them. */
  private bury(replica: string): void {
    this.router.failWhere(
      (call) => call.replica === replica,
      () => disconnected("The server holding the device's stream stopped; the call was lost"),
    );
    this.presence.forget((holder) => holder.replica === replica);
  }

  /** Stops the heartbeat for good: this replica is shutting down and must not come up again. */
  stop(): void {
    this.closing = true;
    clearInterval(this.timer);
  }

  /** The last step of shutting down: the others see this replica gone at once, not after its heartbeat expires. */
  async leave(): Promise<void> {
    await this.replica.pub.del(this.replica.names.replica(this.replica.id)).catch(() => {});
    this.isUp = false;
  }
}
