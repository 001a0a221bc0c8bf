import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { connectRedis } from "../../../db/redis.js";
import type { Dispatcher } from "../dispatcher.js";
import { redisNames, type InboxMessage } from "../redis-wire.js";

/**
 * One replica of a cluster as its parts (presence, routing, liveness) see it: its id, its two Redis
 * connections (one publishes and runs commands, one only listens), the in-memory dispatcher of the
 * streams it holds, and where its errors go.
 */
export interface Replica {
  readonly id: string;
  readonly names: ReturnType<typeof redisNames>;
  readonly pub: Redis;
  readonly sub: Redis;
  /** The streams this replica holds: one per device, timeouts, cancellation and busy limits as on one replica. */
  readonly local: Dispatcher;
  /** Hands an error to the `onError` option; never throws. */
  readonly report: (error: unknown) => void;
  /** Publishes to another replica's inbox; resolves to how many replicas heard it (0: it is gone). */
  readonly send: (replica: string, message: InboxMessage) => Promise<number>;
}

export interface ReplicaOptions {
  url: string;
  prefix?: string;
  onError?: (error: unknown) => void;
}

export function openReplica(options: ReplicaOptions, makeLocal: (callIdPrefix: string) => Dispatcher): Replica {
  const id = randomUUID();
  const names = redisNames(options.prefix ?? "tether:host:");
  // No offline queue: while Redis is away a command fails at once instead of waiting in memory.
  const pub = connectRedis(options.url, { failFast: true });
  const sub = connectRedis(options.url, { failFast: true });
  return {
    id,
    names,
    pub,
    sub,
    // Call ids start with the holder's id, so a result posted to any replica finds the one awaiting it.
    local: makeLocal(`${id}~`),
    report(error) {
      try {
        options.onError?.(error);
      } catch {
        /* the reporter's failure is its own */
      }
    },
    send: (replica, message) => pub.publish(names.inbox(replica), JSON.stringify(message)),
  };
}

/** The replica holding a call, read from its id (see `local` above); undefined for an id made by no replica. */
export function holderOfCall(callId: string): string | undefined {
  return callId.includes("~") ? callId.slice(0, callId.indexOf("~")) : undefined;
}
