import { randomUUID } from "node:crypto";
import { Redis, type RedisOptions } from "ioredis";
import type { AnnouncedTool } from "../../protocol/index.js";
import {
  createMemoryDispatcher,
  DeviceCallError,
  type Dispatcher,
  type Expectation,
  type MemoryDispatcherOptions,
  type PresenceChange,
  type PresenceListener,
  type SettleVerdict,
} from "./dispatcher.js";
import { CLAIM_SCRIPT, RELEASE_SCRIPT, redisNames, type ControlMessage, type InboxMessage, type PresenceMessage } from "./redis-wire.js";

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

interface Holder {
  replica: string;
  userId: string;
  tools: AnnouncedTool[];
}

interface RemoteCall {
  replica: string;
  resolve(value: unknown): void;
  reject(error: DeviceCallError): void;
  cleanup(): void;
}

/**
 * The dispatcher of a cluster: every replica runs one, on one Redis. Each replica keeps the streams
 * it holds in an in-memory dispatcher (so one stream per device, timeouts, cancellation and busy
 * limits behave exactly as on one replica) and routes the rest over Redis pub/sub:
 *
 * - Presence: a replica that gets a stream claims the device (a lease key and a numbered broadcast,
 *   atomically: redis-wire.ts); every replica mirrors the claims, so `isOnline` and `toolsOf` cost no
 *   round trip, and a claim elsewhere closes an older stream here (`replaced`).
 * - Calls: a call for a device held elsewhere is published to the holder's inbox, which runs it on
 *   its stream and publishes the outcome back; cancellation follows the same way.
 * - Results: call ids start with the holder's id, so a result posted to any replica is forwarded to
 *   the one that awaits it, and its verdict comes back.
 * - Liveness: replicas renew a heartbeat key; when one's expires, the others fail the calls waiting
 *   on it (`DEVICE_DISCONNECTED`, within about 3 heartbeats) and show its devices offline.
 * - Redis unreachable: `available()` is false, calls fail at once (`DISPATCH_UNAVAILABLE`), streams
 *   held here are closed (`shutdown`) so devices reconnect once Redis is back; recovery is automatic.
 */
export function createRedisDispatcher(options: RedisDispatcherOptions): Dispatcher & { readonly replicaId: string } {
  const me = randomUUID();
  const names = redisNames(options.prefix ?? "tether:host:");
  const heartbeatMs = options.heartbeatMs ?? 1_000;
  const leaseMs = options.deviceLeaseMs ?? 30_000;
  const answerTimeoutMs = options.answerTimeoutMs ?? 2_000;
  const defaultTimeoutMs = options.defaultTimeoutMs ?? 30_000;
  const maxTimeoutMs = options.maxTimeoutMs ?? 10 * 60_000;
  const report = (error: unknown) => {
    try {
      options.onError?.(error);
    } catch {
      /* the reporter's failure is its own */
    }
  };

  // No offline queue: while Redis is away a command fails at once instead of waiting in memory.
  const connection: RedisOptions = { enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy: (times) => Math.min(times * 100, 1_000) };
  const pub = new Redis(options.url, connection);
  const sub = new Redis(options.url, connection);

  const local = createMemoryDispatcher({ ...options, callIdPrefix: `${me}~` });
  const holders = new Map<string, Holder>();
  /** The newest presence number applied per device: a late, older message changes nothing. */
  const applied = new Map<string, number>();
  /** This replica's claims, by device: their numbers, once Redis has run them. */
  const claims = new Map<string, Promise<number>>();
  const remote = new Map<string, RemoteCall>();
  const served = new Map<string, AbortController>();
  const questions = new Map<string, (answer: SettleVerdict | Expectation) => void>();
  const listeners = new Set<PresenceListener>();
  const releases = new Set<Promise<unknown>>();
  let up = false;
  let closing = false;
  let lastRenewal = 0;

  const unavailable = () => new DeviceCallError("DISPATCH_UNAVAILABLE", "Calls cannot be routed right now (the shared dispatcher is unreachable); try again shortly");
  const send = (replica: string, message: InboxMessage) => pub.publish(names.inbox(replica), JSON.stringify(message));

  const announce = (change: PresenceChange) => {
    for (const listener of listeners) {
      try {
        listener(change);
      } catch {
        /* a listener's failure is its own */
      }
    }
  };

  const finish = (rid: string, outcome: { result: unknown } | { error: DeviceCallError }) => {
    const call = remote.get(rid);
    if (!call) return;
    remote.delete(rid);
    call.cleanup();
    if ("error" in outcome) call.reject(outcome.error);
    else call.resolve(outcome.result);
  };

  const failRemote = (which: (call: RemoteCall) => boolean, error: () => DeviceCallError) => {
    for (const [rid, call] of [...remote]) if (which(call)) finish(rid, { error: error() });
  };

  /** A newer claim elsewhere: this replica's stream of the device, if older, gives way. */
  const yieldTo = async (message: PresenceMessage) => {
    if (!local.isOnline(message.d)) return;
    const mine = (await claims.get(message.d)?.catch(() => 0)) ?? 0;
    if (message.s > mine) await local.disconnect(message.d, "replaced", "A newer connection of this device, on another replica, replaced this one");
  };

  const applyPresence = (message: PresenceMessage) => {
    if ((applied.get(message.d) ?? 0) >= message.s) return;
    applied.set(message.d, message.s);
    const known = holders.get(message.d);
    if (message.on) {
      holders.set(message.d, { replica: message.r, userId: message.u, tools: message.t ?? [] });
      if (message.r !== me) void yieldTo(message).catch(report);
      announce({ deviceId: message.d, userId: message.u, online: true });
    } else if (known) {
      holders.delete(message.d);
      announce({ deviceId: message.d, userId: message.u, online: false });
    }
  };

  /** Claims and releases in Redis follow this replica's own streams. */
  local.onPresence(({ deviceId, userId, online }) => {
    if (online) {
      const tools = [...(local.toolsOf(deviceId) ?? [])];
      const body = JSON.stringify({ on: true, d: deviceId, u: userId, r: me, t: tools });
      const claim = pub.eval(CLAIM_SCRIPT, 3, names.device(deviceId), names.sequence, names.presence, body, String(leaseMs)).then(Number);
      claims.set(deviceId, claim);
      claim.then(
        (seq) => applyPresence({ s: seq, on: true, d: deviceId, u: userId, r: me, t: tools }),
        (error: unknown) => {
          report(error);
          // Unclaimed, the stream cannot be reached from the other replicas: the device reconnects later.
          if (claims.get(deviceId) === claim) void local.disconnect(deviceId, "shutdown", "The server cannot route calls right now; reconnect shortly");
        },
      );
      return;
    }
    claims.delete(deviceId);
    const body = JSON.stringify({ on: false, d: deviceId, u: userId, r: me });
    const release = pub
      .eval(RELEASE_SCRIPT, 3, names.device(deviceId), names.sequence, names.presence, me, body)
      .then((seq) => {
        if (Number(seq) > 0) applyPresence({ s: Number(seq), on: false, d: deviceId, u: userId, r: me });
      })
      .catch(report)
      .finally(() => releases.delete(release));
    releases.add(release);
  });

  const answer = (to: string, rid: string, value: SettleVerdict | Expectation) => send(to, { k: "answer", rid, answer: value }).catch(report);

  const onInbox = (message: InboxMessage) => {
    switch (message.k) {
      case "call": {
        const controller = new AbortController();
        served.set(message.rid, controller);
        local
          .call(message.d, message.tool, message.input, { ...message.options, signal: controller.signal })
          .then(
            (result) => send(message.from, { k: "done", rid: message.rid, ok: true, result }),
            (error: unknown) => {
              const failure = error instanceof DeviceCallError ? error : new DeviceCallError("DEVICE_DISCONNECTED", String(error));
              return send(message.from, { k: "done", rid: message.rid, ok: false, code: failure.code, message: failure.message, fromTool: failure.fromTool });
            },
          )
          .catch(report)
          .finally(() => served.delete(message.rid));
        return;
      }
      case "cancel":
        return served.get(message.rid)?.abort();
      case "done":
        return finish(message.rid, message.ok ? { result: message.result } : { error: new DeviceCallError(message.code, message.message, message.fromTool) });
      case "settle":
        return void local.settle(message.d, message.result).then((verdict) => answer(message.from, message.rid, verdict));
      case "expects":
        return void local.expects(message.d, message.callId).then((expectation) => answer(message.from, message.rid, expectation));
      case "answer":
        return questions.get(message.rid)?.(message.answer);
    }
  };

  /** Asks the replica that holds a call about it; undefined when it is gone or does not answer in time. */
  const ask = async (replica: string, question: (rid: string) => InboxMessage): Promise<SettleVerdict | Expectation | undefined> => {
    if (!up) throw unavailable();
    const rid = randomUUID();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done(undefined), answerTimeoutMs);
      const done = (value: SettleVerdict | Expectation | undefined) => {
        clearTimeout(timer);
        questions.delete(rid);
        resolve(value);
      };
      questions.set(rid, done);
      send(replica, question(rid)).then(
        (receivers) => receivers === 0 && done(undefined),
        () => {
          clearTimeout(timer);
          questions.delete(rid);
          reject(unavailable());
        },
      );
    });
  };
  const holderOfCall = (callId: string) => (callId.includes("~") ? callId.slice(0, callId.indexOf("~")) : undefined);

  sub.on("message", (channel: string, text: string) => {
    try {
      if (channel === names.presence) applyPresence(JSON.parse(text) as PresenceMessage);
      else if (channel === names.control) {
        const control = JSON.parse(text) as ControlMessage;
        void local.disconnect(control.d, control.reason, control.message);
      } else onInbox(JSON.parse(text) as InboxMessage);
    } catch (error) {
      report(error);
    }
  });

  /** What every replica already claimed, for a replica that (re)joins. */
  const loadMirror = async () => {
    let cursor = "0";
    do {
      const [next, keys] = await pub.scan(cursor, "MATCH", names.devicePattern, "COUNT", 1000);
      cursor = next;
      if (keys.length === 0) continue;
      for (const value of await pub.mget(...keys)) if (value) applyPresence(JSON.parse(value) as PresenceMessage);
    } while (cursor !== "0");
  };

  const goUp = async () => {
    if (up || closing || pub.status !== "ready" || sub.status !== "ready") return;
    try {
      await pub.set(names.replica(me), "1", "PX", heartbeatMs * 3);
      await sub.subscribe(names.presence, names.control, names.inbox(me));
      await loadMirror();
      up = true;
    } catch (error) {
      report(error);
    }
  };

  const goDown = () => {
    if (!up) return;
    up = false;
    failRemote(() => true, unavailable);
    void local.closeAll();
    for (const [deviceId, holder] of [...holders]) {
      holders.delete(deviceId);
      announce({ deviceId, userId: holder.userId, online: false });
    }
    applied.clear();
  };

  /** A replica whose heartbeat expired: its streams are gone, and so are the calls waiting on them. */
  const bury = (replica: string) => {
    failRemote(
      (call) => call.replica === replica,
      () => new DeviceCallError("DEVICE_DISCONNECTED", "The server holding the device's stream stopped; the call was lost"),
    );
    for (const [deviceId, holder] of [...holders]) {
      if (holder.replica !== replica) continue;
      holders.delete(deviceId);
      announce({ deviceId, userId: holder.userId, online: false });
    }
  };

  const heartbeat = async () => {
    if (!up) return goUp();
    await pub.set(names.replica(me), "1", "PX", heartbeatMs * 3);
    const others = [...new Set([...[...holders.values()].map((h) => h.replica), ...[...remote.values()].map((c) => c.replica)])].filter((r) => r !== me);
    if (others.length > 0) {
      const alive = await pub.mget(...others.map((replica) => names.replica(replica)));
      others.forEach((replica, i) => alive[i] === null && bury(replica));
    }
    if (Date.now() - lastRenewal > leaseMs / 3) {
      lastRenewal = Date.now();
      const renewal = pub.pipeline();
      for (const [deviceId, holder] of holders) if (holder.replica === me) renewal.pexpire(names.device(deviceId), leaseMs);
      await renewal.exec();
    }
  };
  const timer = setInterval(() => void heartbeat().catch(report), heartbeatMs);
  timer.unref();
  for (const redis of [pub, sub]) {
    redis.on("ready", () => void goUp());
    redis.on("close", goDown);
    redis.on("error", (error: unknown) => report(error));
  }

  return {
    /** This replica's id in Redis (logged at start: it names the holder in presence keys). */
    replicaId: me,

    async connect(device, tools, channel) {
      const connection = await local.connect(device, tools, channel);
      await claims.get(device.id)?.catch(() => {});
      return connection;
    },

    async disconnect(deviceId, reason, message) {
      await local.disconnect(deviceId, reason, message);
      const control: ControlMessage = { k: "disconnect", d: deviceId, reason, message };
      await pub.publish(names.control, JSON.stringify(control)).catch(report);
    },

    isOnline: (deviceId) => up && holders.has(deviceId),
    toolsOf: (deviceId) => (up ? holders.get(deviceId)?.tools : undefined),

    call(deviceId, tool, input, callOptions = {}) {
      if (!up) return Promise.reject(unavailable());
      const holder = holders.get(deviceId);
      if (!holder) return Promise.reject(new DeviceCallError("DEVICE_OFFLINE", "The device is not connected"));
      if (holder.replica === me) return local.call(deviceId, tool, input, callOptions);
      const { signal, ...rest } = callOptions;
      if (signal?.aborted) return Promise.reject(new DeviceCallError("CALL_ABORTED", "The call was abandoned before it was sent"));
      const rid = randomUUID();
      const waitMs = Math.min(Math.max(1, rest.timeoutMs ?? defaultTimeoutMs), maxTimeoutMs);
      return new Promise((resolve, reject) => {
        const giveUp = (error: DeviceCallError) => {
          if (!remote.has(rid)) return;
          finish(rid, { error });
          send(holder.replica, { k: "cancel", rid }).catch(report);
        };
        // The holder times the call out itself; this only covers a holder that never answers at all.
        const timer = setTimeout(() => giveUp(new DeviceCallError("DEVICE_TIMEOUT", `The device did not answer within ${waitMs} ms`)), waitMs + answerTimeoutMs);
        const onAbort = () => giveUp(new DeviceCallError("CALL_ABORTED", "The caller stopped waiting"));
        signal?.addEventListener("abort", onAbort, { once: true });
        const cleanup = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
        };
        remote.set(rid, { replica: holder.replica, resolve, reject, cleanup });
        send(holder.replica, { k: "call", rid, from: me, d: deviceId, tool, input, options: { ...rest, timeoutMs: waitMs } }).then(
          (receivers) => receivers === 0 && finish(rid, { error: new DeviceCallError("DEVICE_DISCONNECTED", "The server holding the device's stream is gone") }),
          () => finish(rid, { error: unavailable() }),
        );
      });
    },

    async expects(deviceId, callId) {
      const holder = holderOfCall(callId);
      if (holder === undefined || holder === me) return local.expects(deviceId, callId);
      const answer = await ask(holder, (rid) => ({ k: "expects", rid, from: me, d: deviceId, callId }));
      return typeof answer === "object" ? answer : { verdict: "unknown_call" };
    },

    async settle(deviceId, result) {
      const holder = holderOfCall(result.id);
      if (holder === undefined || holder === me) return local.settle(deviceId, result);
      const answer = await ask(holder, (rid) => ({ k: "settle", rid, from: me, d: deviceId, result }));
      return typeof answer === "string" ? answer : "unknown_call";
    },

    onPresence(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    available: () => up,

    async closeAll() {
      closing = true;
      clearInterval(timer);
      await local.closeAll();
      await Promise.allSettled([...releases]);
      failRemote(
        () => true,
        () => new DeviceCallError("DEVICE_DISCONNECTED", "The server is shutting down"),
      );
      await pub.del(names.replica(me)).catch(() => {});
      up = false;
      sub.disconnect();
      pub.disconnect();
    },
  };
}
