import { randomUUID } from "node:crypto";
import { StreamEvent, type CallEvent } from "../../protocol/index.js";
import { callTimeoutMs } from "./dispatch/awaited-call.js";
import { checkCall } from "./dispatch/call-check.js";
import { DeviceCallError, deviceOffline, disconnected } from "./dispatch/device-call-error.js";
import { CallBook, openConnection, Pending, type Connection } from "./dispatch/memory-calls.js";
import { PresenceListeners } from "./dispatch/presence-listeners.js";
import type { Dispatcher } from "./dispatcher.js";

export interface MemoryDispatcherOptions {
  defaultTimeoutMs?: number;
  /** Upper bound of any call's wait. */
  maxTimeoutMs?: number;
  /** Calls in flight per device beyond which a new call fails fast with `DEVICE_BUSY`. */
  maxPendingPerDevice?: number;
  /** How many settled call ids are remembered, so a replay is told apart from an unknown id. */
  settledMemory?: number;
  /** Prefix of the call ids this dispatcher makes (the Redis backend routes results by it). */
  callIdPrefix?: string;
}

/**
 * The dispatcher of one replica: the device streams it holds, and the calls awaited on them. Its
 * parts: `checkCall` (what refuses a call before it is sent), `CallBook` (awaited and settled calls),
 * `AwaitedCall` (deadline and abort, shared with the Redis dispatcher), `PresenceListeners`.
 */
export function createMemoryDispatcher(options: MemoryDispatcherOptions = {}): Dispatcher {
  const maxInFlight = options.maxPendingPerDevice ?? 64;
  const callIdPrefix = options.callIdPrefix ?? "";
  const connections = new Map<string, Connection>();
  const calls = new CallBook(Math.max(1, options.settledMemory ?? 10_000));
  const presence = new PresenceListeners();

  /** Ends a connection: fails its calls in flight; removes it if it is still the device's current one. */
  const retire = (connection: Connection, failure: DeviceCallError) => {
    if (connection.closed) return;
    connection.closed = true;
    for (const pending of [...connection.pending]) {
      calls.remember(pending);
      pending.reject(failure);
    }
    if (connections.get(connection.deviceId) === connection) {
      connections.delete(connection.deviceId);
      presence.announce({ deviceId: connection.deviceId, userId: connection.userId, online: false });
    }
  };

  /** A call ends without a result (timed out, abandoned): the device is told to cancel it. */
  const giveUp = (pending: Pending, error: DeviceCallError) => {
    if (!calls.isAwaited(pending)) return;
    calls.remember(pending);
    if (!pending.connection.closed) pending.connection.channel.send(StreamEvent.cancel, { id: pending.id });
    pending.reject(error);
  };

  return {
    async connect(device, tools, channel) {
      const previous = connections.get(device.id);
      const connection: Connection = openConnection(device, tools, channel, () => retire(connection, disconnected("The device disconnected before answering")));
      connections.set(device.id, connection);
      if (previous) {
        retire(previous, disconnected("The device reconnected before answering; the call was lost"));
        previous.channel.close("replaced", "A newer connection of this device replaced this one");
      }
      // Online again even when it replaced a stream: the new one may announce other tools.
      presence.announce({ deviceId: device.id, userId: device.userId, online: true });
      return connection;
    },

    async disconnect(deviceId, reason, message) {
      const connection = connections.get(deviceId);
      if (!connection) return;
      retire(connection, disconnected(`The device's stream was closed (${reason})`));
      connection.channel.close(reason, message);
    },

    isOnline: (deviceId) => connections.has(deviceId),

    toolsOf: (deviceId) => connections.get(deviceId)?.toolList,

    call(deviceId, toolName, input, callOptions = {}) {
      const connection = connections.get(deviceId);
      if (!connection) return Promise.reject(deviceOffline());
      const checked = checkCall({ tools: connection.tools, inFlight: connection.pending.size, maxInFlight }, toolName, callOptions);
      if (checked instanceof DeviceCallError) return Promise.reject(checked);
      const timeoutMs = callTimeoutMs(callOptions.timeoutMs, options);
      const id = callIdPrefix + randomUUID();
      const pending = new Pending(id, deviceId, checked.tool.class, connection, giveUp, timeoutMs, callOptions.signal);
      calls.add(pending);
      const event: CallEvent = { id, tool: toolName, input, mode: checked.mode, timeoutMs };
      if (callOptions.expectedPlan !== undefined) event.expectedPlan = callOptions.expectedPlan;
      if (callOptions.blobs !== undefined) event.blobs = callOptions.blobs;
      connection.channel.send(StreamEvent.call, event);
      return pending.result;
    },

    async expects(deviceId, callId) {
      const pending = calls.get(callId);
      if (!pending) return { verdict: calls.verdictWithout(callId, deviceId) };
      return pending.deviceId === deviceId ? { verdict: "accepted", toolClass: pending.toolClass } : { verdict: "wrong_device" };
    },

    async settle(deviceId, result) {
      const pending = calls.get(result.id);
      if (!pending) return calls.verdictWithout(result.id, deviceId);
      if (pending.deviceId !== deviceId) return "wrong_device";
      calls.remember(pending);
      pending.deliver(result);
      return "accepted";
    },

    onPresence: (listener) => presence.add(listener),

    available: () => true,

    async closeAll() {
      for (const connection of [...connections.values()]) {
        retire(connection, disconnected("The server is shutting down"));
        connection.channel.close("shutdown", "The server is shutting down; reconnect shortly");
      }
    },
  };
}
