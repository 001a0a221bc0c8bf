import type { AnnouncedTool, CloseReason, ResultBody } from "../../protocol/index.js";
import type { CallOptions, Expectation, SettleVerdict } from "./dispatcher.js";

/**
 * What the replicas of a cluster say to each other over Redis (see redis-dispatcher.ts): key names,
 * message shapes and the two Lua scripts that keep the presence key and its announcement in step.
 */

export function redisNames(prefix: string) {
  return {
    /** Broadcast: `PresenceMessage`s, in the order their scripts ran. */
    presence: `${prefix}presence`,
    /** Broadcast: `ControlMessage`s (close a device's stream wherever it is). */
    control: `${prefix}control`,
    /** One replica's own channel: calls, cancellations, results and questions addressed to it. */
    inbox: (replica: string) => `${prefix}inbox:${replica}`,
    /** A replica's heartbeat; it is dead once this expires. */
    replica: (replica: string) => `${prefix}replica:${replica}`,
    /** Which replica holds a device's stream (a lease the holder renews). */
    device: (deviceId: string) => `${prefix}device:${deviceId}`,
    devicePattern: `${prefix}device:*`,
    /** Orders presence changes: each carries the next number. */
    sequence: `${prefix}presence-seq`,
  };
}

export interface PresenceMessage {
  /** Order of the change; an older one arriving late is ignored. */
  s: number;
  on: boolean;
  d: string;
  u: string;
  /** The replica holding (or, when `on` is false, releasing) the stream. */
  r: string;
  t?: AnnouncedTool[];
}

export interface ControlMessage {
  k: "disconnect";
  d: string;
  reason: CloseReason;
  message: string;
}

export type InboxMessage =
  | { k: "call"; rid: string; from: string; d: string; tool: string; input: unknown; options: Omit<CallOptions, "signal"> }
  | { k: "cancel"; rid: string }
  | { k: "done"; rid: string; ok: true; result: unknown }
  | { k: "done"; rid: string; ok: false; code: string; message: string; fromTool: boolean }
  | { k: "settle"; rid: string; from: string; d: string; result: ResultBody }
  | { k: "expects"; rid: string; from: string; d: string; callId: string }
  | { k: "answer"; rid: string; answer: SettleVerdict | Expectation };

/**
 * Claims a device's stream for this replica: the lease key and the announcement, atomically and
 * numbered, so every replica applies claims and releases in the order Redis ran them.
 * KEYS: device key, sequence key, presence channel. ARGV: the message without `s` (JSON), lease ms.
 */
export const CLAIM_SCRIPT = `
local seq = redis.call('INCR', KEYS[2])
local message = '{"s":' .. seq .. ',' .. string.sub(ARGV[1], 2)
redis.call('SET', KEYS[1], message, 'PX', ARGV[2])
redis.call('PUBLISH', KEYS[3], message)
return seq`;

/**
 * Releases the claim only if this replica still holds it (a newer claim elsewhere stays), and
 * announces the device offline. KEYS: as CLAIM. ARGV: this replica's id, the message without `s`.
 */
export const RELEASE_SCRIPT = `
local current = redis.call('GET', KEYS[1])
if not current then return 0 end
if cjson.decode(current)['r'] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
local seq = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', KEYS[3], '{"s":' .. seq .. ',' .. string.sub(ARGV[2], 2))
return seq`;
