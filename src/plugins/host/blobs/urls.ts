import type { Kysely } from "kysely";
import type { SignedStateKey } from "../../../crypto/signed-state.js";
import type { Database } from "../../../db/schema.js";
import * as repo from "./repository.js";
import type { BlobRecord } from "./repository.js";
import { newNonce, signGrant, verifyGrant } from "./signed-url.js";
import { BlobError } from "./store.js";

/** A blob as the API shows it: `url` is a signed download URL until `expiresAt`. */
export interface BlobHandle {
  id: string;
  size: number;
  digest: string;
  contentType: string;
  url: string;
  expiresAt: string;
}

export interface BlobUrlsOptions {
  db: Kysely<Database>;
  key: SignedStateKey;
  /** The server's public base address, for the URLs handed out. */
  baseURL: string;
  urlTtlMs: number;
}

/**
 * The signed URLs blobs are handed out with (signed-url.ts signs them): a download URL in each handle, a
 * single-use upload URL, and the check of a URL someone presents against the blob's row.
 */
export function blobUrls({ db, key, baseURL, urlTtlMs }: BlobUrlsOptions) {
  const base = baseURL.replace(/\/$/, "");
  const urlFor = (id: string, token: string) => `${base}/api/host/blobs/${id}?t=${encodeURIComponent(token)}`;
  /** A URL never outlives its blob. */
  const urlExpiry = (blob: BlobRecord) => new Date(Math.min(Date.now() + urlTtlMs, blob.expiresAt.getTime()));

  function handle(blob: BlobRecord): BlobHandle {
    const expiresAt = urlExpiry(blob);
    const token = signGrant(key, { blobId: blob.id, direction: "get", size: blob.size, digest: blob.digest, userId: blob.userId }, expiresAt);
    return {
      id: blob.id,
      size: blob.size,
      digest: blob.digest,
      contentType: blob.contentType,
      url: urlFor(blob.id, token),
      expiresAt: expiresAt.toISOString(),
    };
  }

  /** A fresh single-use upload URL; the previous one (a failed attempt's) stops working. */
  async function uploadUrl(blob: BlobRecord): Promise<{ url: string; expiresAt: string }> {
    const nonce = newNonce();
    if (!(await repo.setUploadNonce(db, blob.id, nonce))) throw new BlobError("BLOB_URL_USED", "This blob is already complete; it takes no more uploads");
    const expiresAt = urlExpiry(blob);
    const token = signGrant(key, { blobId: blob.id, direction: "put", size: blob.size, digest: blob.digest, userId: blob.userId, nonce }, expiresAt);
    return { url: urlFor(blob.id, token), expiresAt: expiresAt.toISOString() };
  }

  /** The blob a signed URL names, checked against its row: same owner, size and digest, not expired. */
  async function granted(
    id: string,
    token: string | undefined,
    direction: "get" | "put",
    callerUserId?: string,
  ): Promise<{ blob: BlobRecord; nonce?: string }> {
    const grant = verifyGrant(key, token, id, direction);
    const blob = await repo.findBlob(db, id);
    if (!blob || blob.expiresAt.getTime() <= Date.now()) throw new BlobError("BLOB_NOT_FOUND", "This blob is gone (expired or deleted)");
    if (blob.userId !== grant.userId || blob.size !== grant.size || blob.digest !== grant.digest) {
      throw new BlobError("BLOB_URL_INVALID", "This URL does not match the blob it names");
    }
    if (callerUserId !== undefined && callerUserId !== blob.userId) throw new BlobError("BLOB_WRONG_USER", "This blob URL was made for another user");
    return { blob, ...(grant.nonce ? { nonce: grant.nonce } : {}) };
  }

  return { handle, uploadUrl, granted };
}
