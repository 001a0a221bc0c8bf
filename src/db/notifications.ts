import { randomBytes } from "node:crypto";
import type { Socket } from "node:net";
import type { PGlite } from "@electric-sql/pglite";
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
 * A dedicated connection LISTENs (a pooled one cannot), reconnecting with backoff when lost. A
 * connection that a firewall silently drops (no FIN) looks alive for good, so TCP keepalive is on and
 * the connection NOTIFYs a private channel of its own every second: PostgreSQL delivers notifications
 * in commit order, so a heartbeat coming back proves everything committed before it was sent has
 * arrived. One unanswered for `boundMs` means the connection is stalled: it is dropped and replaced.
 */
export function listenWithPg(config: pg.ClientConfig, heartbeat: HeartbeatOptions = {}): NotificationSource {
  const intervalMs = heartbeat.intervalMs ?? HEARTBEAT_INTERVAL_MS;
  const boundMs = heartbeat.boundMs ?? HEARTBEAT_BOUND_MS;
  return async (channel, handlers) => {
    const heartbeatChannel = `tether_heartbeat_${randomBytes(6).toString("hex")}`;
    let closed = false;
    let client: pg.Client | undefined;
    let delay = 100;
    // Send time of the oldest heartbeat not yet back (heartbeats return in order).
    let unanswered: number | null = null;

    const connect = async (): Promise<void> => {
      const next = new pg.Client({ keepAlive: true, keepAliveInitialDelayMillis: 10_000, connectionTimeoutMillis: boundMs, ...config });
      next.on("notification", (message) => {
        if (message.channel === channel) handlers.onMessage(message.payload ?? "");
        else if (message.channel === heartbeatChannel && client === next) {
          const sentAt = Number(message.payload);
          if (unanswered !== null && sentAt >= unanswered) unanswered = null;
          handlers.onProven(sentAt);
        }
      });
      next.on("error", () => lost(next));
      next.on("end", () => lost(next));
      try {
        await next.connect();
        await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        await next.query(`LISTEN ${pg.escapeIdentifier(heartbeatChannel)}`);
      } catch (error) {
        destroy(next);
        throw error;
      }
      if (closed) return destroy(next);
      client = next;
      unanswered = null;
      delay = 100;
      handlers.onReady(boundMs);
    };

    const lost = (which: pg.Client) => {
      if (client !== which) return;
      client = undefined;
      handlers.onLost();
      destroy(which);
      if (!closed) scheduleReconnect();
    };

    const scheduleReconnect = () => {
      const timer = setTimeout(() => {
        connect().catch(() => {
          delay = Math.min(delay * 2, MAX_RECONNECT_DELAY_MS);
          if (!closed) scheduleReconnect();
        });
      }, delay);
      timer.unref();
    };

    const beat = setInterval(() => {
      const current = client;
      if (!current) return;
      const now = Date.now();
      if (unanswered !== null && now - unanswered > boundMs) return lost(current);
      unanswered ??= now;
      // A failure here also surfaces as the client's `error` event (or as the heartbeat never returning).
      current.query("select pg_notify($1, $2)", [heartbeatChannel, String(now)]).catch(() => {});
    }, intervalMs);
    beat.unref();

    await connect().catch((error: unknown) => {
      clearInterval(beat);
      throw error;
    });
    return {
      async close() {
        closed = true;
        clearInterval(beat);
        const current = client;
        client = undefined;
        if (current) destroy(current);
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

/** PGlite is in-process: its notifications cannot be lost or stall. */
export function listenWithPglite(pglite: PGlite): NotificationSource {
  return async (channel, handlers) => {
    const unlisten = await pglite.listen(channel, (payload) => handlers.onMessage(payload));
    handlers.onReady(null);
    return {
      async close() {
        if (!pglite.closed) await unlisten().catch(() => {});
      },
    };
  };
}
