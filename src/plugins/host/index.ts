/**
 * `tether/host`: the server side of the device host connector. Register `hostPlugin` (after the
 * session plugin) and, inside the guarded pages, `devicePages`; run `hostMigrations` (the consuming
 * app owns the tables). The device side is `src/device` (`runHost`, `runCli`).
 */
export { hostPlugin, type HostPluginOptions } from "./host-plugin.js";
export { devicePages } from "./pages.js";
export {
  createMemoryDispatcher,
  DeviceCallError,
  type CallOptions,
  type DeviceChannel,
  type DeviceConnection,
  type Dispatcher,
  type DispatchErrorCode,
  type MemoryDispatcherOptions,
  type PresenceListener,
  type SettleVerdict,
} from "./dispatcher.js";
export { createHostService, type CallOutcome, type CallRequest, type Caller, type DeviceView, type HostService, type WatchTopic } from "./service.js";
export { HostError, toHttpError, type HostErrorCode } from "./errors.js";
export { assistantTools, type AssistantTool } from "./assistant.js";
export { HOST_CALL_SCOPE, hostCaller, hostPerson } from "./callers.js";
export * as devices from "./devices.js";
export * as proposals from "./proposals.js";
export * as audit from "./audit.js";
export { PAIRING_CODE_TTL_MS, MAX_FAILED_ATTEMPTS } from "./pairing.js";
export * from "../../protocol/index.js";
export { hostMigrations } from "../../../migrations/index.js";
