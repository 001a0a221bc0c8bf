/**
 * `tether/host`: the server side of the device host connector. Register `hostPlugin` after the session plugin,
 * the audit plugin (`tether/activity`) and `streamLimitsPlugin` (`tether/http`, which admits its device streams);
 * it decorates `fastify.tetherHost` (`HostService`). Put `hostDeviceAuthorization(...)` into
 * `createAuth({ plugins })` for the device grant, and `devicePages` and `deviceApprovalPage` (from `tether/web`)
 * inside the guarded pages; run `hostMigrations` (the consuming app owns the tables). The device side is
 * `tether/device`, the wire protocol `tether/protocol`.
 */
export { hostPlugin, type HostPluginOptions } from "./host-plugin.js";
export { hostDeviceAuthorization, type HostDeviceAuthorizationOptions } from "./device-grant.js";
export type { CallOutcome, CallRequest, Caller, DeviceView, HostService, WatchTopic } from "./service.js";
export type { DeviceGrant } from "./credential-grants.js";
export type { AssistantTool } from "./assistant.js";
export type { DownloadCatalog, HostDownload } from "./downloads.js";
export { DeviceCallError, type Dispatcher, type DispatchErrorCode } from "./dispatcher.js";
export { HOST_ERROR_CODES, HostError, type HostErrorCode } from "./errors.js";
export { hostCaller, hostPerson } from "./callers.js";
export { blobPlugin, type BlobPluginOptions } from "./blobs/blob-plugin.js";
export type { BlobService, BlobHandle } from "./blobs/service.js";
export { createEmbeddedBlobStore } from "./blobs/embedded-store.js";
export { createS3BlobStore, type S3BlobStoreOptions } from "./blobs/s3-store.js";
export { BlobError, BLOB_STATUS, type BlobStore, type BlobErrorCode, type BlobExpectation, type ByteRange } from "./blobs/store.js";
export { hostMigrations } from "../../../migrations/index.js";
