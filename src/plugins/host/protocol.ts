/**
 * The host stream protocol, version 1: the one contract between the server (`src/plugins/host`) and
 * the device runtime (`src/device`). Pure data: no I/O, no framework, safe to bundle into the device.
 *
 *   1. `POST /api/host/hello`  (device token, `Tether-Protocol: 1`) announces the device's tools and
 *      roots; the server stores them on the device row.
 *   2. `GET /api/host/stream`  (device token, `Tether-Protocol: 1`) opens the Server-Sent Events
 *      stream. Events: `ready`, `call`, `cancel`, `close`, plus `: keep-alive` comments.
 *   3. `POST /api/host/result/:callId` (device token, `Tether-Protocol: 1`) posts one call's outcome back
 *      (the id in the path is checked before the body is read; the older `POST /api/host/result`
 *      with the id in the body is still served).
 *
 * A device speaking another version gets 400 `PROTOCOL_VERSION_UNSUPPORTED`, naming both versions.
 */
export const PROTOCOL_VERSION = 1;

/** Request header in which the device names the protocol version it speaks. */
export const PROTOCOL_HEADER = "tether-protocol";

export type ToolClass = "read" | "mutate" | "action";
export type ToolMode = "run" | "plan" | "apply";

/** A tool as a device announces it (the MCP triple plus its class). */
export interface AnnouncedTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  class: ToolClass;
}

/** `POST /api/host/hello` body. */
export interface HelloBody {
  tools: AnnouncedTool[];
  roots: string[];
  /** The device program and its version, e.g. `tether-host/0.1.0`. */
  agent?: string;
}

export interface HelloReply {
  protocol: number;
  deviceId: string;
  name: string;
}

/** Names of the events the server sends down the stream. */
export const StreamEvent = {
  /** First event on every stream: `ReadyEvent`. */
  ready: "ready",
  /** Run a tool: `CallEvent`. */
  call: "call",
  /** Give up on a call (the server stopped waiting): `CancelEvent`. */
  cancel: "cancel",
  /** The server is ending this stream: `CloseEvent`. The stream ends right after it. */
  close: "close",
} as const;

export interface ReadyEvent {
  protocol: number;
  deviceId: string;
  /** Interval of `: keep-alive` comments; a device hearing nothing for 3× this reconnects. */
  keepAliveMs: number;
}

export interface CallEvent {
  id: string;
  tool: string;
  input: unknown;
  mode: ToolMode;
  /** How long the server waits for the result; the device may abort after it. */
  timeoutMs: number;
  /** For `apply`: the approved plan, which the device's fresh plan must reproduce exactly. */
  expectedPlan?: { diff: string; summary: string };
}

export interface CancelEvent {
  id: string;
}

/**
 * Why the server ended a stream:
 * - `replaced`: a newer stream of the same device took over (do not reconnect: another process has it);
 * - `revoked`: the device's credential was revoked (pair again);
 * - `shutdown`: the server is stopping (reconnect with backoff).
 */
export type CloseReason = "replaced" | "revoked" | "shutdown";

export interface CloseEvent {
  reason: CloseReason;
  message: string;
}

/** `POST /api/host/result` body: exactly one outcome per call id. */
export type ResultBody =
  | { id: string; ok: true; result: unknown }
  | { id: string; ok: false; error: { code: string; message: string } };

/** The device token's prefix; the rest is 32 random bytes in base64url. */
export const DEVICE_TOKEN_PREFIX = "dt_";
