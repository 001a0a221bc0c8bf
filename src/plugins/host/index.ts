/**
 * `tether/host`: the server side of the device host connector. Register `hostPlugin` (after the
 * session plugin) and, inside the guarded pages, `devicePages` (from `tether/web`); run
 * `hostMigrations` (the consuming app owns the tables). The device side is `tether/device`.
 */
export { hostPlugin, type HostPluginOptions } from "./host-plugin.js";
export {
  createMemoryDispatcher,
  DeviceCallError,
  type CallOptions,
  type DeviceChannel,
  type DeviceConnection,
  type Dispatcher,
  type DispatchErrorCode,
  type Expectation,
  type MemoryDispatcherOptions,
  type PresenceChange,
  type PresenceListener,
  type SettleVerdict,
  type StreamOwner,
} from "./dispatcher.js";
export { createRedisDispatcher, type RedisDispatcherOptions } from "./redis-dispatcher.js";
export { createHostService, type CallOutcome, type CallRequest, type Caller, type DeviceView, type HostService, type WatchTopic } from "./service.js";
export { HostError, hostRefusal, rethrowAsHttpError, toHttpError, type HostErrorCode } from "./errors.js";
export { openSseStream, type SseStream } from "./sse-channel.js";
export { shownPart, type ShownDiff } from "./diff-limits.js";
export { assistantTools, type AssistantTool } from "./assistant.js";
export { HOST_CALL_SCOPE, hostCaller, hostPerson } from "./callers.js";
export * as devices from "./devices.js";
export * as proposals from "./proposals.js";
export * as audit from "./audit.js";
export { PAIRING_CODE_TTL_MS, MAX_FAILED_ATTEMPTS } from "./pairing.js";
export * from "../../protocol/index.js";
export { hostMigrations } from "../../../migrations/index.js";
