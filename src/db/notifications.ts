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
  const intervalMs = heartbeat.intervalMs ?? HEARTBEAT_INTERVAL_MS;
  const boundMs = heartbeat.boundMs ?? HEARTBEAT_BOUND_MS;
  const heartbeatChannel = `tether_heartbeat_${randomBytes(6).toString("hex")}`;
  const subscribers = new Map<string, Set<ListenHandlers>>();
  const everyone = () => [...subscribers.values()].flatMap((handlers) => [...handlers]);
  /** The live connection, and the channels it LISTENs to. */
  let client: pg.Client | undefined;
  let listening = new Set<string>();
  /** Handlers told `onReady` on the live connection (a new connection tells them again). */
  let ready = new Set<ListenHandlers>();
  let connecting: Promise<void> | undefined;
  let reconnectTimer: NodeJS.Timeout | undefined;
  let beat: NodeJS.Timeout | undefined;
  let delay = 100;
  // Send time of the oldest heartbeat not yet back (heartbeats return in order).
  let unanswered: number | null = null;

  const markReady = (handlers: ListenHandlers) => {
    if (ready.has(handlers)) return;
    ready.add(handlers);
    handlers.onReady(boundMs);
  };

  const connect = (): Promise<void> =>
    (connecting ??= (async () => {
      const next = new pg.Client({ keepAlive: true, keepAliveInitialDelayMillis: 10_000, connectionTimeoutMillis: boundMs, ...config });
      next.on("notification", (message) => {
        if (message.channel !== heartbeatChannel) {
          for (const handlers of subscribers.get(message.channel) ?? []) handlers.onMessage(message.payload ?? "");
        } else if (client === next) {
          const sentAt = Number(message.payload);
          if (unanswered !== null && sentAt >= unanswered) unanswered = null;
          for (const handlers of everyone()) handlers.onProven(sentAt);
        }
      });
      next.on("error", () => lost(next));
      next.on("end", () => lost(next));
      const channels = new Set(subscribers.keys());
      try {
        await next.connect();
        for (const channel of [heartbeatChannel, ...channels]) await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      } catch (error) {
        destroy(next);
        throw error;
      }
      if (subscribers.size === 0) return destroy(next); // everyone left meanwhile
      client = next;
      listening = channels;
      ready = new Set();
      unanswered = null;
      delay = 100;
      for (const channel of channels) for (const handlers of subscribers.get(channel) ?? []) markReady(handlers);
    })().finally(() => {
      connecting = undefined;
    }));

  const lost = (which: pg.Client) => {
    if (client !== which) return;
    client = undefined;
    listening = new Set();
    ready = new Set();
    for (const handlers of everyone()) handlers.onLost();
    destroy(which);
    scheduleReconnect();
  };

  const scheduleReconnect = () => {
    if (reconnectTimer || subscribers.size === 0) return;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      if (client || subscribers.size === 0) return;
      connect().catch(() => {
        delay = Math.min(delay * 2, MAX_RECONNECT_DELAY_MS);
        scheduleReconnect();
      });
    }, delay);
    reconnectTimer.unref();
  };

  const startBeat = () => {
    beat ??= setInterval(() => {
      const current = client;
      if (!current) return;
      const now = Date.now();
      if (unanswered !== null && now - unanswered > boundMs) return lost(current);
      unanswered ??= now;
      // A failure here also surfaces as the client's `error` event (or as the heartbeat never returning).
      current.query("select pg_notify($1, $2)", [heartbeatChannel, String(now)]).catch(() => {});
    }, intervalMs);
    beat.unref();
  };

  /** The last subscriber gone: the connection and its timers go too. */
  const unsubscribe = (channel: string, handlers: ListenHandlers) => {
    const set = subscribers.get(channel);
    set?.delete(handlers);
    ready.delete(handlers);
    if (set?.size !== 0) return;
    subscribers.delete(channel);
    if (client && listening.delete(channel)) client.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => {});
    if (subscribers.size > 0) return;
    clearInterval(beat);
    beat = undefined;
    clearTimeout(reconnectTimer);
    reconnectTimer = undefined;
    const current = client;
    client = undefined;
    if (current) destroy(current);
  };

  return async (channel, handlers) => {
    const set = subscribers.get(channel) ?? new Set<ListenHandlers>();
    subscribers.set(channel, set);
    set.add(handlers);
    try {
      // The first subscription (or the first while the server is away) waits for a connection; a
      // failure rejects it, as a database that is down at start-up should.
      if (!client) await connect();
    } catch (error) {
      unsubscribe(channel, handlers);
      throw error;
    }
    const current = client;
    if (current && !listening.has(channel)) {
      // A channel new to a live connection. If that connection dies here, the next one LISTENs to it.
      await current.query(`LISTEN ${pg.escapeIdentifier(channel)}`).then(
        () => client === current && listening.add(channel),
        () => {},
      );
    }
    if (current && client === current && listening.has(channel)) markReady(handlers);
    startBeat();
    let closed = false;
    return {
      async close() {
        if (closed) return;
        closed = true;
        unsubscribe(channel, handlers);
      },
    };
  };
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
