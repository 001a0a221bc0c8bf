import { HttpError } from "../../http/errors.js";
import { DeviceCallError, type DispatchErrorCode, type SettleVerdict } from "./dispatcher.js";
import { BLOB_STATUS, BlobError } from "./blobs/store.js";
import type { Decision } from "./proposals.js";

/**
 * A refusal by the host service (no HTTP in it): a code and a message. The host routes turn these,
 * and the dispatcher's `DeviceCallError`s, into `HttpError`s in one place: `toHttpError`.
 */
export class HostError extends Error {
  constructor(
    readonly code: HostErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "HostError";
  }
}

export type HostErrorCode = keyof typeof HOST_STATUS;

const HOST_STATUS = {
  DEVICE_NOT_FOUND: 404,
  PROPOSAL_NOT_FOUND: 404,
  ALREADY_DECIDED: 409,
  PROPOSAL_EXPIRED: 409,
  NOT_A_PROPOSAL: 502,
  /** The device's plan broke the protocol's bounds (src/protocol/plan.ts): its fault, as a bad result is. */
  PLAN_INVALID: 502,
  DIFF_TOO_LARGE: 422,
  TOO_MANY_PENDING: 429,
  INVALID_CURSOR: 400,
  PAIRING_CODE_INVALID: 400,
  PAIRING_CODE_USED: 409,
  PAIRING_CODE_EXPIRED: 410,
  PAIRING_CODE_VOID: 410,
  RATE_LIMITED: 429,
  RATE_LIMIT_UNAVAILABLE: 503,
  DEVICE_TOKEN_INVALID: 401,
  DEVICE_REVOKED: 401,
  PROTOCOL_VERSION_UNSUPPORTED: 400,
  HELLO_REQUIRED: 409,
  UNKNOWN_CALL: 404,
  WRONG_DEVICE: 403,
  RESULT_ALREADY_RECEIVED: 409,
  COOKIE_SESSION_REQUIRED: 403,
  NOT_A_READ_TOOL: 403,
} as const;

const DISPATCH_STATUS: Record<DispatchErrorCode, number> = {
  UNKNOWN_TOOL: 400,
  INVALID_MODE: 400,
  DEVICE_OFFLINE: 409,
  DEVICE_BUSY: 429,
  DEVICE_TIMEOUT: 504,
  DEVICE_DISCONNECTED: 502,
  CALL_ABORTED: 503,
  DISPATCH_UNAVAILABLE: 503,
};

/**
 * Every `code` the host connector answers with (`{ code, message }`), and its HTTP status: the service's refusals
 * (`HostError`) and the dispatcher's (`DeviceCallError`). The table to switch on; docs/protocol.md describes each.
 */
export const HOST_ERROR_CODES: Readonly<Record<HostErrorCode | DispatchErrorCode, number>> = Object.freeze({ ...HOST_STATUS, ...DISPATCH_STATUS });

/**
 * The host routes' error handler: maps host and dispatch errors to HttpErrors and rethrows them to the
 * app's one error handler, which renders them (JSON for the API, a page for /devices).
 */
export async function rethrowAsHttpError(error: unknown): Promise<never> {
  throw toHttpError(error);
}

/**
 * What a caller gets when the device's result for its call was refused at the result route (too large,
 * malformed, NUL bytes): the call ends at once with this code instead of waiting out its timeout.
 */
export const DEVICE_RESULT_INVALID = "DEVICE_RESULT_INVALID";

/**
 * The one mapping from host and dispatch errors to HTTP, for the API and the pages alike: a tool's own
 * error is 422 with its code; a result the server refused is the device's fault, 502. Anything else is
 * returned as it is.
 */
export function toHttpError(error: unknown): unknown {
  if (error instanceof HostError) return new HttpError(HOST_STATUS[error.code], error.code, error.message);
  // A blob a call names (write_file's content) that is not the caller's, not complete, or a store fault.
  if (error instanceof BlobError) return new HttpError(BLOB_STATUS[error.code], error.code, error.message);
  if (error instanceof DeviceCallError) {
    const status = error.code === DEVICE_RESULT_INVALID ? 502 : error.fromTool ? 422 : (DISPATCH_STATUS[error.code as DispatchErrorCode] ?? 502);
    return new HttpError(status, error.code, error.message);
  }
  return error;
}

/** A host or dispatch refusal as the HttpError the API would answer; anything else is rethrown. */
export function hostRefusal(error: unknown): HttpError {
  const mapped = toHttpError(error);
  if (mapped instanceof HttpError) return mapped;
  throw error;
}

/** Why the dispatcher did not take a device's result, as the device is told. */
export function settleRefusal(verdict: Exclude<SettleVerdict, "accepted">): HostError {
  if (verdict === "unknown_call") return new HostError("UNKNOWN_CALL", "No call with this id is waiting for a result");
  if (verdict === "wrong_device") return new HostError("WRONG_DEVICE", "This call was sent to another device");
  return new HostError("RESULT_ALREADY_RECEIVED", "This call already has its result (or was given up)");
}

/** Why an approval or rejection did not happen. */
export function refusal(decision: Exclude<Decision, { ok: true }>): HostError {
  if (decision.reason === "not_found") return new HostError("PROPOSAL_NOT_FOUND", "You have no proposal with this id");
  if (decision.reason === "expired") return new HostError("PROPOSAL_EXPIRED", "This proposal expired; run the tool again for a fresh diff");
  return new HostError("ALREADY_DECIDED", `This proposal was already decided (${decision.status})`);
}
