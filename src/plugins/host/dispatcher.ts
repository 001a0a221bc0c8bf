import { randomUUID } from "node:crypto";
import {
  StreamEvent,
  type AnnouncedTool,
  type CallEvent,
  type CloseReason,
  type ResultBody,
  type ToolMode,
} from "../../protocol/index.js";

/**
 * Routes tool calls to connected devices and awaits their results. The interface knows nothing of
 * HTTP: a stream is a `DeviceChannel` (send an event, close), a result is a `ResultBody`. The one
 * implementation here keeps everything in memory, so the app runs as a single replica; a shared
 * backend (e.g. Redis or Postgres LISTEN/NOTIFY) can implement the same interface.
 */
export interface Dispatcher {
  /**
   * Makes `channel` the device's one live stream, closing an older one (`replaced`) and failing the
   * calls in flight on it. The returned connection detaches itself, and only itself.
   */
  connect(deviceId: string, tools: readonly AnnouncedTool[], channel: DeviceChannel): DeviceConnection;
  /** Closes the device's stream (e.g. its credential was revoked) and fails its calls in flight. */
  disconnect(deviceId: string, reason: CloseReason, message: string): void;
  isOnline(deviceId: string): boolean;
  /** The tools the connected device announced; undefined when it is offline. */
  toolsOf(deviceId: string): readonly AnnouncedTool[] | undefined;
  /** Sends a call down the device's stream and resolves to its result, or rejects with `DeviceCallError`. */
  call(deviceId: string, tool: string, input: unknown, options?: CallOptions): Promise<unknown>;
  /** Accepts a result only from the device the call went to, and only once. */
  settle(deviceId: string, result: ResultBody): SettleVerdict;
  /** Tells `listener` whenever a device comes online or goes offline. Returns an unsubscribe function. */
  onPresence(listener: PresenceListener): () => void;
  /** Closes every stream (`shutdown`) and fails every call in flight. */
  closeAll(): void;
}

export interface DeviceChannel {
  send(event: string, data: unknown): void;
  /** Sends a final `close` event and ends the stream. */
  close(reason: CloseReason, message: string): void;
}

export interface DeviceConnection {
  readonly deviceId: string;
  /** Call when the stream ends on its own (client went away): fails the calls that were in flight on it. */
  detach(): void;
}

export interface CallOptions {
  /** Defaults to `plan` for a mutate tool and `run` for the others. */
  mode?: ToolMode;
  /** How long to wait for the result; defaults to the dispatcher's `defaultTimeoutMs`. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** For `apply`: the approved plan (see `CallEvent.expectedPlan`). */
  expectedPlan?: CallEvent["expectedPlan"];
}

export type PresenceListener = (deviceId: string, online: boolean) => void;

export type SettleVerdict = "accepted" | "unknown_call" | "wrong_device" | "already_settled";

export type DispatchErrorCode =
  | "UNKNOWN_TOOL"
  | "INVALID_MODE"
  | "DEVICE_OFFLINE"
  | "DEVICE_BUSY"
  | "DEVICE_TIMEOUT"
  | "DEVICE_DISCONNECTED"
  | "CALL_ABORTED";

/**
 * Why a call did not produce a result. `fromTool` tells a tool's own error (its code, e.g.
 * `OUTSIDE_ROOTS`, as the device reported it) from a failure to get an answer at all.
 */
export class DeviceCallError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly fromTool = false,
  ) {
    super(message);
    this.name = "DeviceCallError";
  }
}

export interface MemoryDispatcherOptions {
  defaultTimeoutMs?: number;
  /** Upper bound of any call's wait. */
  maxTimeoutMs?: number;
  /** Calls in flight per device beyond which a new call fails fast with `DEVICE_BUSY`. */
  maxPendingPerDevice?: number;
  /** How many settled call ids are remembered, so a replay is told apart from an unknown id. */
  settledMemory?: number;
}

interface Pending {
  id: string;
  deviceId: string;
  connection: Connection;
  resolve(value: unknown): void;
  reject(error: DeviceCallError): void;
  cleanup(): void;
}

interface Connection extends DeviceConnection {
  channel: DeviceChannel;
  tools: ReadonlyMap<string, AnnouncedTool>;
  pending: Set<Pending>;
  closed: boolean;
}

export function createMemoryDispatcher(options: MemoryDispatcherOptions = {}): Dispatcher {
  const defaultTimeoutMs = options.defaultTimeoutMs ?? 30_000;
  const maxTimeoutMs = options.maxTimeoutMs ?? 10 * 60_000;
  const maxPending = options.maxPendingPerDevice ?? 64;
  const settledMemory = options.settledMemory ?? 10_000;

  const connections = new Map<string, Connection>();
  const pendingCalls = new Map<string, Pending>();
  /** Recently settled call id → device id, oldest first (a Map keeps insertion order). */
  const settled = new Map<string, string>();
  const presenceListeners = new Set<PresenceListener>();

  const announce = (deviceId: string, online: boolean) => {
    for (const listener of presenceListeners) {
      try {
        listener(deviceId, online);
      } catch {
        /* a listener's failure is its own */
      }
    }
  };

  const remember = (pending: Pending) => {
    pendingCalls.delete(pending.id);
    pending.connection.pending.delete(pending);
    pending.cleanup();
    settled.set(pending.id, pending.deviceId);
    if (settled.size > settledMemory) settled.delete(settled.keys().next().value!);
  };

  /** Ends a connection: fails its calls in flight; removes it if it is still the device's current one. */
  const retire = (connection: Connection, failure: DeviceCallError) => {
    if (connection.closed) return;
    connection.closed = true;
    for (const pending of [...connection.pending]) {
      remember(pending);
      pending.reject(failure);
    }
    if (connections.get(connection.deviceId) === connection) {
      connections.delete(connection.deviceId);
      announce(connection.deviceId, false);
    }
  };

  const disconnected = (message: string) => new DeviceCallError("DEVICE_DISCONNECTED", message);

  return {
    connect(deviceId, tools, channel) {
      const previous = connections.get(deviceId);
      const connection: Connection = {
        deviceId,
        channel,
        tools: new Map(tools.map((tool) => [tool.name, tool])),
        pending: new Set(),
        closed: false,
        detach: () => retire(connection, disconnected("The device disconnected before answering")),
      };
      connections.set(deviceId, connection);
      if (previous) {
        retire(previous, disconnected("The device reconnected before answering; the call was lost"));
        previous.channel.close("replaced", "A newer connection of this device replaced this one");
      } else {
        announce(deviceId, true);
      }
      return connection;
    },

    disconnect(deviceId, reason, message) {
      const connection = connections.get(deviceId);
      if (!connection) return;
      retire(connection, disconnected(`The device's stream was closed (${reason})`));
      connection.channel.close(reason, message);
    },

    isOnline: (deviceId) => connections.has(deviceId),

    toolsOf: (deviceId) => {
      const connection = connections.get(deviceId);
      return connection ? [...connection.tools.values()] : undefined;
    },

    call(deviceId, toolName, input, callOptions = {}) {
      const connection = connections.get(deviceId);
      if (!connection) {
        return Promise.reject(new DeviceCallError("DEVICE_OFFLINE", "The device is not connected"));
      }
      const tool = connection.tools.get(toolName);
      if (!tool) {
        return Promise.reject(new DeviceCallError("UNKNOWN_TOOL", `The device has no tool named "${toolName}"`));
      }
      const mode = callOptions.mode ?? (tool.class === "mutate" ? "plan" : "run");
      const allowed = tool.class === "mutate" ? mode === "plan" || mode === "apply" : mode === "run";
      if (!allowed) {
        const expected = tool.class === "mutate" ? `"plan" or "apply"` : `"run"`;
        return Promise.reject(new DeviceCallError("INVALID_MODE", `"${toolName}" is a ${tool.class} tool: its mode is ${expected}, not "${mode}"`));
      }
      if (connection.pending.size >= maxPending) {
        return Promise.reject(new DeviceCallError("DEVICE_BUSY", `The device already has ${maxPending} calls in flight`));
      }
      if (callOptions.signal?.aborted) {
        return Promise.reject(new DeviceCallError("CALL_ABORTED", "The call was abandoned before it was sent"));
      }
      const timeoutMs = Math.min(Math.max(1, callOptions.timeoutMs ?? defaultTimeoutMs), maxTimeoutMs);
      const id = randomUUID();

      return new Promise<unknown>((resolve, reject) => {
        const giveUp = (error: DeviceCallError) => {
          if (!pendingCalls.has(id)) return;
          remember(pending);
          if (!connection.closed) connection.channel.send(StreamEvent.cancel, { id });
          reject(error);
        };
        const timer = setTimeout(
          () => giveUp(new DeviceCallError("DEVICE_TIMEOUT", `The device did not answer within ${timeoutMs} ms`)),
          timeoutMs,
        );
        const onAbort = () => giveUp(new DeviceCallError("CALL_ABORTED", "The caller stopped waiting"));
        callOptions.signal?.addEventListener("abort", onAbort, { once: true });
        const pending: Pending = {
          id,
          deviceId,
          connection,
          resolve,
          reject,
          cleanup: () => {
            clearTimeout(timer);
            callOptions.signal?.removeEventListener("abort", onAbort);
          },
        };
        pendingCalls.set(id, pending);
        connection.pending.add(pending);
        const event: CallEvent = { id, tool: toolName, input, mode, timeoutMs };
        if (callOptions.expectedPlan !== undefined) event.expectedPlan = callOptions.expectedPlan;
        connection.channel.send(StreamEvent.call, event);
      });
    },

    settle(deviceId, result) {
      const pending = pendingCalls.get(result.id);
      if (!pending) {
        const owner = settled.get(result.id);
        if (owner === undefined) return "unknown_call";
        return owner === deviceId ? "already_settled" : "wrong_device";
      }
      if (pending.deviceId !== deviceId) return "wrong_device";
      remember(pending);
      if (result.ok) pending.resolve(result.result);
      else pending.reject(new DeviceCallError(result.error.code, result.error.message, true));
      return "accepted";
    },

    onPresence(listener) {
      presenceListeners.add(listener);
      return () => presenceListeners.delete(listener);
    },

    closeAll() {
      for (const connection of [...connections.values()]) {
        retire(connection, disconnected("The server is shutting down"));
        connection.channel.close("shutdown", "The server is shutting down; reconnect shortly");
      }
    },
  };
}
