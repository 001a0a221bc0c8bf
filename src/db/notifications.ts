import { randomBytes } from "node:crypto";
import type { Socket } from "node:net";
import type { PgliteThread } from "./pglite-thread.js";
import pg from "pg";

export interface Subscription {
  close(): Promise<void>;
}

export interface ListenHandlers {
  onMessage(payload: string): void;
  /**
   * The channel is (re)connected: nothing was missed from here on. `proofBoundMs` is null when delivery
   * cannot stall (in-process); otherwise delivery counts as proven only while `onProven` keeps arriving
   * with a `sentAt` no older than that.
   */
  onReady(proofBoundMs: number | null): void;
  /** A heartbeat sent at `sentAt` came back: every change committed before `sentAt` has been delivered. */
  onProven(sentAt: number): void;
  /** Delivery stopped (connection lost or stalled): anything may have been missed until the next onReady. */
  onLost(): void;
}

/** LISTEN on a Postgres channel, whichever database is underneath. */
export type NotificationSource = (channel: string, handlers: ListenHandlers) => Promise<Subscription>;

export interface HeartbeatOptions {
  /** How often the connection NOTIFYs itself. */
  intervalMs?: number;
  /**
   * How old the last proven heartbeat may be before the channel is unproven (and, if one is still
   * unanswered after this long, declared stalled and replaced). This is the bound on how long a change
   * made elsewhere can go unseen by a cache that trusts this channel.
   */
  boundMs?: number;
}

export const HEARTBEAT_INTERVAL_MS = 1_000;
export const HEARTBEAT_BOUND_MS = 5_000;
const MAX_RECONNECT_DELAY_MS = 5_000;

/**
 * One dedicated connection LISTENs for every channel of the process (a pooled one cannot), reconnecting
 * with backoff when lost: a replica holds one LISTEN connection however many caches it runs. A
 * connection that a firewall silently drops (no FIN) looks alive for good, so TCP keepalive is on and
 * the connection NOTIFYs a private channel of its own every second: PostgreSQL delivers a connection's
 * notifications in commit order, whatever their channel, so a heartbeat coming back proves everything
 * committed before it was sent has arrived on every channel. One unanswered for `boundMs` means the
 * connection is stalled: it is dropped and replaced. The connection opens with the first subscription
 * and closes with the last.
 */
export function listenWithPg(config: pg.ClientConfig, heartbeat: HeartbeatOptions = {}): NotificationSource {
  const listener = new SharedListener(config, heartbeat.intervalMs ?? HEARTBEAT_INTERVAL_MS, heartbeat.boundMs ?? HEARTBEAT_BOUND_MS);
  return (channel, handlers) => listener.subscribe(channel, handlers);
}

/**
 * The heartbeat's bookkeeping: the send time of the oldest heartbeat not yet back (heartbeats return
 * in order, so one coming back answers every one sent before it).
 */
class Heartbeat {
  private unanswered: number | null = null;

  constructor(private readonly boundMs: number) {}

  /** Whether one sent before `now` has gone unanswered for longer than the bound: the connection is stalled. */
  overdue(now: number): boolean {
    return this.unanswered !== null && now - this.unanswered > this.boundMs;
  }

  sent(at: number): void {
    this.unanswered ??= at;
  }

  answered(sentAt: number): void {
    if (this.unanswered !== null && sentAt >= this.unanswered) this.unanswered = null;
  }

  /** A new connection: nothing is outstanding on it. */
  reset(): void {
    this.unanswered = null;
  }
}

/** The one LISTEN connection of `listenWithPg`, its subscribers, its heartbeat and its reconnection. */
class SharedListener {
  private readonly heartbeatChannel = `tether_heartbeat_${randomBytes(6).toString("hex")}`;
  private readonly subscribers = new Map<string, Set<ListenHandlers>>();
  /** The live connection, and the channels it LISTENs to. */
  private client: pg.Client | undefined;
  private listening = new Set<string>();
  /** Handlers told `onReady` on the live connection (a new connection tells them again). */
  private ready = new Set<ListenHandlers>();
  private connecting: Promise<void> | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private beat: NodeJS.Timeout | undefined;
  private delay = 100;
  private readonly heartbeat: Heartbeat;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly intervalMs: number,
    private readonly boundMs: number,
  ) {
    this.heartbeat = new Heartbeat(boundMs);
  }

  private everyone(): ListenHandlers[] {
    return [...this.subscribers.values()].flatMap((handlers) => [...handlers]);
  }

  private markReady(handlers: ListenHandlers): void {
    if (this.ready.has(handlers)) return;
    this.ready.add(handlers);
    handlers.onReady(this.boundMs);
  }

  /** Opens a connection (one attempt at a time) LISTENing to every channel subscribed, and makes it the live one. */
  private connect(): Promise<void> {
    return (this.connecting ??= this.open().finally(() => {
      this.connecting = undefined;
    }));
  }

  private async open(): Promise<void> {
    const next = new pg.Client({ keepAlive: true, keepAliveInitialDelayMillis: 10_000, connectionTimeoutMillis: this.boundMs, ...this.config });
    next.on("notification", (message) => this.notified(next, message));
    next.on("error", () => this.lost(next));
    next.on("end", () => this.lost(next));
    const channels = new Set(this.subscribers.keys());
    try {
      await next.connect();
      for (const channel of [this.heartbeatChannel, ...channels]) await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (error) {
      destroy(next);
      throw error;
    }
    if (this.subscribers.size === 0) return destroy(next); // everyone left meanwhile
    this.client = next;
    this.listening = channels;
    this.ready = new Set();
    this.heartbeat.reset();
    this.delay = 100;
    for (const channel of channels) for (const handlers of this.subscribers.get(channel) ?? []) this.markReady(handlers);
  }

  private notified(from: pg.Client, message: pg.Notification): void {
    if (message.channel !== this.heartbeatChannel) {
      for (const handlers of this.subscribers.get(message.channel) ?? []) handlers.onMessage(message.payload ?? "");
    } else if (this.client === from) {
      const sentAt = Number(message.payload);
      this.heartbeat.answered(sentAt);
      for (const handlers of this.everyone()) handlers.onProven(sentAt);
    }
  }

  private lost(which: pg.Client): void {
    if (this.client !== which) return;
    this.client = undefined;
    this.listening = new Set();
    this.ready = new Set();
    for (const handlers of this.everyone()) handlers.onLost();
    destroy(which);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.reconnectTimer || this.subscribers.size === 0) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.client || this.subscribers.size === 0) return;
      this.connect().catch(() => {
        this.delay = Math.min(this.delay * 2, MAX_RECONNECT_DELAY_MS);
        this.scheduleReconnect();
      });
    }, this.delay);
    this.reconnectTimer.unref();
  }

  private startBeat(): void {
    this.beat ??= setInterval(() => this.sendBeat(), this.intervalMs);
    this.beat.unref();
  }

  /** NOTIFYs the heartbeat channel; one unanswered for too long drops the connection as stalled. */
  private sendBeat(): void {
    const current = this.client;
    if (!current) return;
    const now = Date.now();
    if (this.heartbeat.overdue(now)) return this.lost(current);
    this.heartbeat.sent(now);
    // A failure here also surfaces as the client's `error` event (or as the heartbeat never returning).
    current.query("select pg_notify($1, $2)", [this.heartbeatChannel, String(now)]).catch(() => {});
  }

  /** The last subscriber gone: the connection and its timers go too. */
  private unsubscribe(channel: string, handlers: ListenHandlers): void {
    const set = this.subscribers.get(channel);
    set?.delete(handlers);
    this.ready.delete(handlers);
    if (set?.size !== 0) return;
    this.subscribers.delete(channel);
    if (this.client && this.listening.delete(channel)) this.client.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => {});
    if (this.subscribers.size > 0) return;
    clearInterval(this.beat);
    this.beat = undefined;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    const current = this.client;
    this.client = undefined;
    if (current) destroy(current);
  }

  async subscribe(channel: string, handlers: ListenHandlers): Promise<Subscription> {
    const set = this.subscribers.get(channel) ?? new Set<ListenHandlers>();
    this.subscribers.set(channel, set);
    set.add(handlers);
    try {
      // The first subscription (or the first while the server is away) waits for a connection; a
      // failure rejects it, as a database that is down at start-up should.
      if (!this.client) await this.connect();
    } catch (error) {
      this.unsubscribe(channel, handlers);
      throw error;
    }
    const current = this.client;
    if (current && !this.listening.has(channel)) {
      // A channel new to a live connection. If that connection dies here, the next one LISTENs to it.
      await current.query(`LISTEN ${pg.escapeIdentifier(channel)}`).then(
        () => this.client === current && this.listening.add(channel),
        () => {},
      );
    }
    if (current && this.client === current && this.listening.has(channel)) this.markReady(handlers);
    this.startBeat();
    let closed = false;
    return {
      close: async () => {
        if (closed) return;
        closed = true;
        this.unsubscribe(channel, handlers);
      },
    };
  }
}

/**
 * Drops a connection without waiting on the server: `end()` waits for the server's goodbye, which a
 * stalled or unreachable server never sends. `pg` does not type the socket it keeps on `connection`.
 */
function destroy(client: pg.Client): void {
  client.removeAllListeners("notification");
  client.on("error", () => {}); // a late socket error on a dropped connection is expected
  (client.connection as unknown as { stream?: Socket }).stream?.destroy();
}

/**
 * PGlite is in this process (in a thread of its own): its notifications cannot stall, so there is no
 * heartbeat. They are lost only while its thread is down, which the thread reports (onLost, then
 * onReady once it is back).
 */
export function listenWithPglite(pglite: Pick<PgliteThread, "listen" | "closed">): NotificationSource {
  return async (channel, handlers) => {
    const unlisten = await pglite.listen(channel, {
      onMessage: (payload) => handlers.onMessage(payload),
      onLost: () => handlers.onLost(),
      onReady: () => handlers.onReady(null),
    });
    return {
      async close() {
        if (!pglite.closed) await unlisten().catch(() => {});
      },
    };
  };
}
