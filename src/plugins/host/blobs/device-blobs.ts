import { BLOB_UPLOAD_CALL, blobSourceOf, type BlobUploadInput } from "../../../protocol/index.js";
import { DeviceCallError, type CallOptions, type Dispatcher } from "../dispatcher.js";
import type { AuditEntry } from "../audit.js";
import type { Caller } from "../service.js";
import type { BlobRecord } from "./repository.js";
import type { BlobService } from "./service.js";
import { BLOB_ID, BlobError } from "./store.js";

/** How long a device may take to upload one blob (the dispatcher's longest wait). */
const UPLOAD_TIMEOUT_MS = 600_000;

/**
 * A read result that describes a file's bytes (`blobSource`, from a device that can upload) leaves with a
 * blob handle in its place: `blob: { id, size, digest, contentType, url, expiresAt }`. Nothing is uploaded
 * yet. Over the owner's quota the result still comes back, with `blob: null` and the refusal in `blobError`.
 */
export async function withBlobHandle(
  blobs: BlobService,
  caller: Caller,
  deviceId: string,
  result: unknown,
  audit: (entry: AuditEntry) => void,
): Promise<unknown> {
  if (typeof result !== "object" || result === null || Array.isArray(result)) return result;
  const source = blobSourceOf(result);
  // `blob` and `blobError` are the server's to write: a device's own (a link to anywhere) never reaches a caller.
  const { blobSource: _source, blob: _forged, blobError: _forgedError, ...rest } = result as Record<string, unknown>;
  if (!source) return "blob" in result || "blobError" in result || "blobSource" in result ? rest : result;
  try {
    const blob = await blobs.create({
      userId: caller.userId,
      deviceId,
      path: source.path,
      size: source.size,
      digest: source.sha256,
      contentType: source.contentType,
    });
    audit({
      userId: caller.userId,
      deviceId,
      actor: caller.actor,
      credential: caller.credential ?? null,
      event: "blob_make",
      outcome: "ok",
      detail: blobDetail(blob),
    });
    return { ...rest, blob: blobs.handle(blob) };
  } catch (error) {
    if (!(error instanceof BlobError)) throw error;
    return { ...rest, blob: null, blobError: { code: error.code, message: error.message } };
  }
}

export function blobDetail(blob: BlobRecord): Record<string, unknown> {
  return { blob: blob.id, path: blob.path, size: blob.size, digest: blob.digest };
}

/**
 * Fetches an incomplete device blob's bytes: a fresh single-use upload URL (a failed attempt's stops working),
 * sent to the device as the reserved `BLOB_UPLOAD_CALL`. A device gone or too slow mid-upload leaves the blob
 * incomplete (`BLOB_INCOMPLETE`; fetching the URL again starts over); its own refusal (the file now outside
 * the roots, changed) is passed on with its code.
 */
export function deviceFetcher(blobs: BlobService, dispatcher: Dispatcher): (blob: BlobRecord) => Promise<void> {
  return async (blob) => {
    const upload: { url: string; headers?: Record<string, string> } = blobs.store.presignPut
      ? await blobs.store.presignPut(blob.id, { size: blob.size, digest: blob.digest }, new Date(Date.now() + UPLOAD_TIMEOUT_MS))
      : await blobs.uploadUrl(blob);
    const input: BlobUploadInput = {
      blobId: blob.id,
      path: blob.path!,
      size: blob.size,
      sha256: blob.digest,
      contentType: blob.contentType,
      url: upload.url,
      ...(upload.headers ? { headers: upload.headers } : {}),
    };
    try {
      await dispatcher.call(blob.deviceId!, BLOB_UPLOAD_CALL, input, { internal: true, timeoutMs: UPLOAD_TIMEOUT_MS });
    } catch (error) {
      if (error instanceof DeviceCallError && ["DEVICE_DISCONNECTED", "DEVICE_TIMEOUT", "CALL_ABORTED"].includes(error.code)) {
        throw new BlobError("BLOB_INCOMPLETE", `The device stopped before the upload completed (${error.message}); fetch the URL again to start over`);
      }
      // A device's direct upload refused or failed: if the server cannot reach the bucket either, the store is down (503).
      if (blobs.store.presignPut && blobs.store.stat && error instanceof DeviceCallError && error.fromTool) await blobs.store.stat(blob.id);
      throw error;
    }
    // A direct upload (to a bucket) never passed through the server: check it landed, then mark it complete.
    if (blobs.store.presignPut && !(await blobs.confirmDirect(blob)))
      throw new BlobError("BLOB_INCOMPLETE", "The device's upload did not arrive whole; fetch the URL again to start over");
  };
}

/**
 * The blob a call's input names (`blob: "b_…"`, write_file's content from an upload), resolved for the device:
 * the caller's own (another user's is "not found"), complete, with a fresh signed download URL. Sent beside the
 * input (`CallOptions.blobs`), so the stored proposal keeps only the id and its apply gets a URL of its own.
 */
export async function blobsForInput(blobs: BlobService, userId: string, input: unknown): Promise<CallOptions["blobs"]> {
  const id = (input as { blob?: unknown } | null)?.blob;
  if (typeof id !== "string" || !BLOB_ID.test(id)) return undefined;
  const blob = await blobs.owned(userId, id);
  if (!blob.complete) throw new BlobError("BLOB_INCOMPLETE", "This blob's bytes were never uploaded: PUT them to its upload URL first");
  // A bucket's own presigned GET when the store has one (the device reads straight from it, as it uploads to it).
  const url = blobs.store.presignGet
    ? await blobs.store.presignGet(blob.id, new Date(Date.now() + UPLOAD_TIMEOUT_MS), { contentType: blob.contentType })
    : blobs.handle(blob).url;
  return { [id]: { url, size: blob.size, sha256: blob.digest, contentType: blob.contentType } };
}
