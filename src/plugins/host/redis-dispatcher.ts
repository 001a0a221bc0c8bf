import type { Redis } from "ioredis";
import type { ControlMessage, InboxMessage, PresenceMessage } from "./redis-wire.js";
import type { Dispatcher } from "./dispatcher.js";
import { createMemoryDispatcher, type MemoryDispatcherOptions } from "./memory-dispatcher.js";
import { deviceOffline, disconnected, dispatchUnavailable } from "./dispatch/device-call-error.js";
import { PresenceListeners } from "./dispatch/presence-listeners.js";
import { PresenceMirror } from "./dispatch/redis-presence.js";
import { openReplica, type Replica } from "./dispatch/redis-replica.js";
import { CallRouter } from "./dispatch/redis-routing.js";
import { Liveness } from "./dispatch/redis-liveness.js";

export interface RedisDispatcherOptions extends MemoryDispatcherOptions {
  url: string;
  /** Prefix of every key and channel (several apps, or tests, on one Redis). Default `tether:host:`. */
  prefix?: string;
  /** How often a replica proves it is alive (default 1 s); one silent for 3× this is dead. */
  heartbeatMs?: number;
  /** Lease on a device's presence key, renewed by its holder (default 30 s). */
  deviceLeaseMs?: number;
  /** Wait for another replica's answer about a result (default 2 s). */
  answerTimeoutMs?: number;
  onError?: (error: unknown) => void;
}

/**
 * The dispatcher of a cluster: every replica runs one, on one Redis. Each replica keeps the streams
 * it holds in an in-memory dispatcher (so one stream per device, timeouts, cancellation and busy
 * limits behave exactly as on one replica) and routes the rest over Redis pub/sub. Its parts, one
 * concern each, under dispatch/:
 *
 * - Presence (`PresenceMirror`, redis-presence.ts): a replica that gets a stream claims the device (a lease key and a numbered broadcast,
 *   atomically: redis-wire.ts); every replica mirrors the claims, so `isOnline` and `toolsOf` cost no
 *   round trip, and a claim elsewhere closes an older stream here (`replaced`).
 * - Calls (`CallRouter`, redis-routing.ts): a call for a device held elsewhere is published to the holder's inbox, which runs it on
 *   its stream and publishes the outcome back; cancellation follows the same way.
 * - Results (the same): call ids start with the holder's id, so a result posted to any replica is forwarded to
 *   the one that awaits it, and its verdict comes back.
 * - Liveness (`Liveness`, redis-liveness.ts): replicas renew a heartbeat key; when one's expires, the others fail the calls waiting
 *   on it (`DEVICE_DISCONNECTED`, within about 3 heartbeats) and show its devices offline.
 * - Redis unreachable (the same): `available()` is false, calls fail at once (`DISPATCH_UNAVAILABLE`), streams
 *   held here are closed (`shutdown`) so devices reconnect once Redis is back; recovery is automatic.
 */
export function createRedisDispatcher(options: RedisDispatcherOptions): Dispatcher & { readonly replicaId: string; readonly commands: Redis } {
  const replica = openReplica(options, (callIdPrefix) => createMemoryDispatcher({ ...options, callIdPrefix }));
  const { local, pub, sub, names, id: me } = replica;
  const listeners = new PresenceListeners();
  const presence = new PresenceMirror(replica, options.deviceLeaseMs ?? 30_000, listeners);
  local.onPresence((change) => presence.follow(change));
  // The router asks liveness whether Redis is up; liveness fails the router's calls when a replica dies.
  const router: CallRouter = new CallRouter(replica, { ...options, answerTimeoutMs: options.answerTimeoutMs ?? 2_000 }, () => liveness.up);
  sub.on("message", (channel: string, text: string) => hear(replica, presence, router, channel, text));
  const liveness: Liveness = new Liveness(replica, options.heartbeatMs ?? 1_000, presence, router);

  return {
    /** This replica's id in Redis (logged at start: it names the holder in presence keys). */
    replicaId: me,
    /** The connection this replica runs commands on (failing fast while Redis is away), for counters that share its Redis. */
    commands: pub,

    async connect(device, tools, channel) {
      const connection = await local.connect(device, tools, channel);
      await presence.claimed(device.id);
      return connection;
    },

    async disconnect(deviceId, reason, message) {
      await local.disconnect(deviceId, reason, message);
      const control: ControlMessage = { k: "disconnect", d: deviceId, reason, message };
      await pub.publish(names.control, JSON.stringify(control)).catch(replica.report);
    },

    isOnline: (deviceId) => liveness.up && presence.holderOf(deviceId) !== undefined,
    toolsOf: (deviceId) => (liveness.up ? presence.holderOf(deviceId)?.tools : undefined),

    call(deviceId, tool, input, callOptions = {}) {
      if (!liveness.up) return Promise.reject(dispatchUnavailable());
      const holder = presence.holderOf(deviceId);
      if (!holder) return Promise.reject(deviceOffline());
      if (holder.replica === me) return local.call(deviceId, tool, input, callOptions);
      return router.callOn(holder.replica, deviceId, tool, input, callOptions);
    },

    expects: (deviceId, callId) => router.expects(deviceId, callId),
    settle: (deviceId, result) => router.settle(deviceId, result),
    onPresence: (listener) => listeners.add(listener),
    available: () => liveness.up,

    async closeAll() {
      liveness.stop();
      await local.closeAll();
      await presence.released();
      router.failWhere(
        () => true,
        () => disconnected("The server is shutting down"),
      );
      await liveness.leave();
      sub.disconnect();
      pub.disconnect();
    },
  };
}

/** A message on a channel this replica listens to: a presence change, a control order, or its own inbox. */
function hear(replica: Replica, presence: PresenceMirror, router: CallRouter, channel: string, text: string): void {
  try {
    if (channel === replica.names.presence) presence.apply(JSON.parse(text) as PresenceMessage);
    else if (channel === replica.names.control) {
      const control = JSON.parse(text) as ControlMessage;
      void replica.local.disconnect(control.d, control.reason, control.message);
    } else router.receive(JSON.parse(text) as InboxMessage);
  } catch (error) {
    replica.report(error);
  }
}
