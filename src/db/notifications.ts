import type { PGlite } from "@electric-sql/pglite";
import pg from "pg";

export interface Subscription {
  close(): Promise<void>;
}

export interface ListenHandlers {
  onMessage(payload: string): void;
  /** The channel is (re)connected: nothing was missed from here on. */
  onReady(): void;
  /** Delivery stopped (connection lost): anything may have been missed until the next onReady. */
  onLost(): void;
}

/** LISTEN on a Postgres channel, whichever database is underneath. */
export type NotificationSource = (channel: string, handlers: ListenHandlers) => Promise<Subscription>;

const MAX_RECONNECT_DELAY_MS = 5_000;

/** A dedicated connection LISTENs (a pooled one cannot), reconnecting with backoff when lost. */
export function listenWithPg(config: pg.ClientConfig): NotificationSource {
  return async (channel, handlers) => {
    let closed = false;
    let client: pg.Client | undefined;
    let delay = 100;

    const connect = async (): Promise<void> => {
      const next = new pg.Client(config);
      next.on("notification", (message) => {
        if (message.channel === channel) handlers.onMessage(message.payload ?? "");
      });
      next.on("error", () => lost(next));
      next.on("end", () => lost(next));
      await next.connect();
      await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      client = next;
      delay = 100;
      handlers.onReady();
    };

    const lost = (which: pg.Client) => {
      if (client !== which) return;
      client = undefined;
      handlers.onLost();
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

    await connect();
    return {
      async close() {
        closed = true;
        const current = client;
        client = undefined;
        await current?.end().catch(() => {});
      },
    };
  };
}

/** PGlite is in-process: its notifications cannot be lost. */
export function listenWithPglite(pglite: PGlite): NotificationSource {
  return async (channel, handlers) => {
    const unlisten = await pglite.listen(channel, (payload) => handlers.onMessage(payload));
    handlers.onReady();
    return {
      async close() {
        if (!pglite.closed) await unlisten().catch(() => {});
      },
    };
  };
}
