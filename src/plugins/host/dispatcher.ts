import type { AnnouncedTool, CallEvent, CloseReason, ResultBody, ToolMode } from "../../protocol/index.js";
import { DeviceCallError } from "./dispatch/device-call-error.js";

export { DeviceCallError };

/**
 * Routes tool calls to connected devices and awaits their results. The interface knows nothing of
 * HTTP: a stream is a `DeviceChannel` (send an event, close), a result is a `ResultBody`. Two
 * implementations: in memory (`memory-dispatcher.ts`, one replica, the default), and on Redis (`redis-dispatcher.ts`,
 * several replicas). Both pass the same contract tests (test/host/dispatcher-contract.test.ts).
 */
export interface Dispatcher {
  /**
   * Makes `channel` the device's one live stream (cluster-wide), closing an older one (`replaced`)
   * wherever it is and failing the calls in flight on it. The returned connection detaches itself,
   * and only itself.
   */
  connect(device: StreamOwner, tools: readonly AnnouncedTool[], channel: DeviceChannel): Promise<DeviceConnection>;
  /** Closes the device's stream wherever it is (e.g. its credential was revoked) and fails its calls in flight. */
  disconnect(deviceId: string, reason: CloseReason, message: string): Promise<void>;
  isOnline(deviceId: string): boolean;
  /** The tools the connected device announced; undefined when it is offline. */
  toolsOf(deviceId: string): readonly AnnouncedTool[] | undefined;
  /** Sends a call down the device's stream and resolves to its result, or rejects with `DeviceCallError`. */
  call(deviceId: string, tool: string, input: unknown, options?: CallOptions): Promise<unknown>;
  /**
   * What `settle` would answer for this call id now, without the result: lets the result route
   * refuse an unknown or foreign call before it reads the body. `accepted` means it is awaited, and
   * then `limits` tells how large the result may be (by the tool's class).
   */
  expects(deviceId: string, callId: string): Promise<Expectation>;
  /** Accepts a result only from the device the call went to, and only once. */
  settle(deviceId: string, result: ResultBody): Promise<SettleVerdict>;
  /**
   * Tells `listener` whenever a device comes online or goes offline, on every replica whichever
   * replica holds the stream (the /devices live page and MCP `tools/list_changed` use it). A
   * device that reconnects with other tools is reported online again. Returns an unsubscribe function.
   */
  onPresence(listener: PresenceListener): () => void;
  /** False while the shared backend is unreachable: calls then fail at once with `DISPATCH_UNAVAILABLE`. */
  available(): boolean;
  /** Closes this replica's streams (`shutdown`), fails its calls in flight, and releases the backend. */
  closeAll(): Promise<void>;
}

/** Whose stream it is: presence changes name the owner, so every replica can tell the owner's pages. */
export interface StreamOwner {
  id: string;
  userId: string;
}

export interface PresenceChange {
  deviceId: string;
  userId: string;
  online: boolean;
}

export type Expectation = { verdict: "accepted"; toolClass: AnnouncedTool["class"] } | { verdict: Exclude<SettleVerdict, "accepted"> };

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
  /** Blobs the input names, resolved by the server (see `CallEvent.blobs`). */
  blobs?: CallEvent["blobs"];
  /** The server's own call (`BLOB_UPLOAD_CALL`), never a caller's: only then is that reserved name sent. */
  internal?: boolean;
}

export type PresenceListener = (change: PresenceChange) => void;

export type SettleVerdict = "accepted" | "unknown_call" | "wrong_device" | "already_settled";

export type DispatchErrorCode =
  "UNKNOWN_TOOL" | "INVALID_MODE" | "DEVICE_OFFLINE" | "DEVICE_BUSY" | "DEVICE_TIMEOUT" | "DEVICE_DISCONNECTED" | "CALL_ABORTED" | "DISPATCH_UNAVAILABLE";
