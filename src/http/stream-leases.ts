import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";

/** The kinds of long-lived stream; a user's per-user cap counts each kind apart. */
export type StreamKind = "device" | "live-view" | "mcp";

/** Who holds a stream: the user, and the one credential that opened it. */
export interface StreamHolder {
  kind: StreamKind;
  userId: string;
  /** The credential that opened it, namespaced (`token:<id>`, `device:<id>`, `session:<id>`, `oauth-token:<hash>`). */
  credential: string;
}

/** Why a stream was not admitted: the holder's own cap, or the server's room for streams. */
export type Refusal = "user" | "credential" | "capacity";

export interface StreamLease {
  /** Frees the slot (idempotent). */
  release(this: void): void;
}

export interface StreamAccountingOptions {
  /** Streams of one kind one user may hold (0: no limit). */
  perUser: number;
  /** Streams one credential may hold (0: no limit). */
  perCredential: number;
  /** Streams of every kind this process may hold together (read at each admission; Infinity: no limit). */
  capacity: () => number;
  /** Shares the per-user and per-credential counts with every replica on this Redis. */
  redis?: Redis;
  /** Redis key prefix (default `tether:streams:`). */
  prefix?: string;
  /** How long a lease lives in Redis unless renewed; this process renews its leases every third of it. */
  leaseMs: number;
  /** A Redis command failed (admission then falls back to this process's own counts). */
  onRedisError?: (error: unknown) => void;
}

export interface StreamAccounting {
  /** A lease for a new stream, or why not. Never rejects: a Redis failure falls back to this process's counts. */
  acquire(holder: StreamHolder): Promise<StreamLease | Refusal>;
  /** Streams this process holds now. */
  readonly held: number;
  /** Stops renewing and gives back every lease this process holds. */
  close(): Promise<void>;
}

/**
 * Takes a lease in both sets unless either is full. Time is Redis's own, so replicas with skewed clocks
 * agree; expired leases (a crashed replica stopped renewing them) are dropped before counting.
 * KEYS: user set, credential set. ARGV: lease id, lease ms, per-user cap, per-credential cap (0: none).
 * Returns 0 when taken, 1 when the user's set is full, 2 when the credential's is.
 */
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
for i = 1, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  local cap = tonumber(ARGV[i + 2])
  if cap > 0 and redis.call('ZCARD', KEYS[i]) >= cap then return i end
end
for i = 1, 2 do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return 0`;

/**
 * Renews leases (re-adding any Redis lost, after a restart or an outage). KEYS[i] holds ARGV[i + 1].
 */
const RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return #KEYS`;

/** Leases renewed per script call: bounds one call's size (and Redis's time in it). */
const RENEW_BATCH = 500;

interface Held {
  id: string;
  userKey: string;
  credentialKey: string;
}

/**
 * Counts long-lived streams per user (per kind) and per credential. This process always keeps its own
 * counts and never holds more than the caps itself. With Redis, every replica's streams count too:
 * each stream is a lease (a member of a sorted set per user and per credential, scored by its expiry)
 * that this process renews while the stream is open, so a replica that crashes stops renewing and its
 * streams stop counting within `leaseMs`. With Redis unreachable, admission falls back to this
 * process's counts alone (each replica then enforces the caps on its own streams, so a user may hold up
 * to the cap on each replica until Redis is back); the renewal re-adds every open stream once Redis
 * answers again, so the shared counts come back true. A failure is never a 5xx and never a stuck count.
 */
export function createStreamAccounting(options: StreamAccountingOptions): StreamAccounting {
  const prefix = options.prefix ?? "tether:streams:";
  const replica = randomUUID();
  let sequence = 0;
  const local = new Map<string, number>();
  const held = new Map<string, Held>();
  const { redis } = options;

  const count = (key: string) => local.get(key) ?? 0;
  const add = (key: string, delta: number) => {
    const next = count(key) + delta;
    if (next > 0) local.set(key, next);
    else local.delete(key);
  };
  const over = (cap: number, n: number) => cap > 0 && n >= cap;

  const renew = async () => {
    if (!redis || held.size === 0) return;
    const leases = [...held.values()];
    for (let i = 0; i < leases.length; i += RENEW_BATCH) {
      const batch = leases.slice(i, i + RENEW_BATCH);
      const keys = batch.flatMap((lease) => [lease.userKey, lease.credentialKey]);
      const ids = batch.flatMap((lease) => [lease.id, lease.id]);
      await redis.eval(RENEW, keys.length, ...keys, String(options.leaseMs), ...ids);
    }
  };
  const timer = redis
    ? setInterval(
        () => {
          renew().catch((error: unknown) => options.onRedisError?.(error));
        },
        Math.max(1_000, Math.floor(options.leaseMs / 3)),
      )
    : undefined;
  timer?.unref();

  /** Frees the lease here; `shared`: it was (or may have been) added in Redis, so take it out there too. */
  const forget = (lease: Held, shared: boolean) => {
    if (!held.delete(lease.id)) return;
    add(lease.userKey, -1);
    add(lease.credentialKey, -1);
    if (!redis || !shared) return;
    // Queued behind any acquire still running on this connection, so it removes what that adds. A
    // removal that fails leaves the lease to expire on its own (within leaseMs).
    redis
      .multi()
      .zrem(lease.userKey, lease.id)
      .zrem(lease.credentialKey, lease.id)
      .exec()
      .catch((error: unknown) => options.onRedisError?.(error));
  };

  return {
    get held() {
      return held.size;
    },

    async acquire(holder) {
      const userKey = `${prefix}u:${holder.kind}:${holder.userId}`;
      const credentialKey = `${prefix}c:${holder.credential}`;
      // This process's own counts first, and taken before any await, so concurrent opens never overshoot.
      if (held.size >= options.capacity()) return "capacity";
      if (over(options.perUser, count(userKey))) return "user";
      if (over(options.perCredential, count(credentialKey))) return "credential";
      const lease: Held = { id: `${replica}:${++sequence}`, userKey, credentialKey };
      held.set(lease.id, lease);
      add(userKey, 1);
      add(credentialKey, 1);
      const handle: StreamLease = { release: () => forget(lease, true) };
      if (!redis) return handle;
      let verdict: number;
      try {
        verdict = Number(
          await redis.eval(ACQUIRE, 2, userKey, credentialKey, lease.id, String(options.leaseMs), String(options.perUser), String(options.perCredential)),
        );
      } catch (error) {
        // Degraded, not refused: this process's own counts admitted it; the renewal shares it once Redis is back.
        options.onRedisError?.(error);
        return handle;
      }
      if (verdict === 0) return handle;
      forget(lease, false);
      return verdict === 1 ? "user" : "credential";
    },

    async close() {
      if (timer) clearInterval(timer);
      const all = [...held.values()];
      held.clear();
      local.clear();
      if (!redis || all.length === 0) return;
      const pipeline = redis.multi();
      for (const lease of all) pipeline.zrem(lease.userKey, lease.id).zrem(lease.credentialKey, lease.id);
      await pipeline.exec().catch((error: unknown) => options.onRedisError?.(error));
    },
  };
}
