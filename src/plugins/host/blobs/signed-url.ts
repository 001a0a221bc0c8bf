import { randomBytes } from "node:crypto";
import { signState, signedStateKey, verifyState, type SignedStateKey } from "../../../crypto/signed-state.js";
import { BlobError } from "./store.js";

/**
 * Signed, expiring blob URLs: an HMAC (under a key derived from the server's secret for this purpose
 * only) over the blob, the direction, its size and digest, its owner and, for uploads, a nonce the row
 * holds until an upload takes it (single use). Any change to the token, or using it for another blob,
 * direction or size, fails the MAC or the comparison with the row.
 */
export type BlobDirection = "get" | "put";

export interface BlobGrant {
  blobId: string;
  direction: BlobDirection;
  size: number;
  digest: string;
  userId: string;
  /** Uploads only: the nonce the row must still hold. */
  nonce?: string;
}

export function blobUrlKey(secret: string): SignedStateKey {
  return signedStateKey(secret, "blob-url");
}

export function newNonce(): string {
  return randomBytes(12).toString("base64url");
}

export function signGrant(key: SignedStateKey, grant: BlobGrant, expiresAt: Date): string {
  return signState(
    key,
    { b: grant.blobId, d: grant.direction, s: grant.size, h: grant.digest, u: grant.userId, ...(grant.nonce ? { n: grant.nonce } : {}) },
    expiresAt,
  );
}

/** The grant a token carries for `blobId` in `direction`, or the refusal a caller should see. */
export function verifyGrant(key: SignedStateKey, token: string | undefined, blobId: string, direction: BlobDirection, now = Date.now()): BlobGrant {
  if (!token) throw new BlobError("BLOB_URL_INVALID", "This blob URL has no signature (the `t` parameter); ask for a fresh URL");
  const verified = verifyState(key, token, now);
  if (!verified.ok) {
    if (verified.reason === "expired") throw new BlobError("BLOB_URL_EXPIRED", "This blob URL has expired; ask for a fresh one");
    throw new BlobError("BLOB_URL_INVALID", "This blob URL's signature is not valid (altered or not ours)");
  }
  const p = verified.payload;
  if (p.b !== blobId || p.d !== direction || typeof p.s !== "number" || typeof p.h !== "string" || typeof p.u !== "string") {
    throw new BlobError("BLOB_URL_INVALID", `This URL is not a ${direction === "get" ? "download" : "upload"} URL for this blob`);
  }
  return { blobId, direction, size: p.s, digest: p.h, userId: p.u, ...(typeof p.n === "string" ? { nonce: p.n } : {}) };
}
