/**
 * `tether/protocol`: the device wire protocol, shared by the server (`tether/host`) and the device
 * runtime (`tether/device`). TypeBox schemas, with the types derived from them.
 */
export * from "./tool.js";
export * from "./messages.js";
export * from "./versions.js";
export * from "./device-authorization.js";
export * from "./plan.js";
export * from "./manifest.js";
export * from "./updates.js";
export * from "./blobs.js";
