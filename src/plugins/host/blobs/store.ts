import type { Readable } from "node:stream";

/**
 * Where a blob's bytes live, behind one interface with no HTTP in it: files under DATA_DIR (one replica,
 * nothing to run; `embedded-store.ts`) or an S3-compatible bucket (several replicas). The rows that say
 * whose a blob is, how large, its digest and whether it is complete are in the database
 * (`repository.ts`); a store knows only ids and bytes.
 */
export interface BlobStore {
  /** `embedded` or `s3`: for logs, /healthz and the docs' wording. */
  readonly kind: string;
  /**
   * Streams `body` in as blob `id`, hashing as it goes. Kept only when the bytes are exactly `expect.size`
   * long and their sha256 is `expect.digest`; otherwise nothing is kept and it rejects with a `BlobError`
   * (`BLOB_SIZE_MISMATCH`, `BLOB_DIGEST_MISMATCH`, `BLOB_STORE_FULL`, `BLOB_STORE_UNAVAILABLE`).
   * A body that ends early or errors (a device gone mid-upload) keeps nothing either.
   */
  put(id: string, body: Readable, expect: BlobExpectation): Promise<void>;
  /** The bytes of a stored blob, or of `range` (inclusive offsets, as HTTP's Range). `BLOB_NOT_FOUND` when absent. */
  open(id: string, range?: ByteRange): Promise<Readable>;
  /** Removes a blob; absent is fine. */
  delete(id: string): Promise<void>;
  /** Every stored id, so a sweep can remove the bytes of rows that are gone. */
  ids(): AsyncIterable<string>;
  /**
   * For stores the bytes can reach directly (a bucket): a URL a client PUTs exactly these bytes to, so they
   * never pass through the server, and the headers the PUT must carry (they are signed: a bucket's checksum
   * header, so the bucket itself refuses other bytes). Undefined for the embedded store (uploads go through
   * our own route).
   */
  presignPut?(id: string, expect: BlobExpectation, expiresAt: Date): Promise<{ url: string; headers?: Record<string, string> }>;
  /** …and one it GETs them from. */
  presignGet?(id: string, expiresAt: Date, download: { contentType: string; fileName?: string }): Promise<string>;
  /** Removes the half-written files of uploads that stopped long ago (a process killed mid-upload); how many. */
  sweepUnfinished?(olderThanMs: number): Promise<number>;
  /** Whether a completed upload is there (a direct upload never passes through the server). */
  stat?(id: string): Promise<{ size: number } | undefined>;
  close?(): Promise<void>;
}

export interface BlobExpectation {
  size: number;
  /** sha256, lower-case hex. */
  digest: string;
}

export interface ByteRange {
  start: number;
  end: number;
}

/** A blob refusal or fault, with no HTTP in it; `BLOB_STATUS` is its one mapping to a status. */
export class BlobError extends Error {
  constructor(
    readonly code: BlobErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "BlobError";
  }
}

export const BLOB_STATUS = {
  BLOB_NOT_FOUND: 404,
  BLOB_INCOMPLETE: 409,
  BLOB_SIZE_MISMATCH: 422,
  BLOB_DIGEST_MISMATCH: 422,
  BLOB_TOO_LARGE: 413,
  BLOB_QUOTA_EXCEEDED: 429,
  BLOB_URL_INVALID: 403,
  BLOB_URL_EXPIRED: 410,
  BLOB_URL_USED: 409,
  BLOB_WRONG_USER: 403,
  BLOB_RANGE_INVALID: 416,
  BLOB_STORE_FULL: 507,
  BLOB_STORE_UNAVAILABLE: 503,
} as const;
export type BlobErrorCode = keyof typeof BLOB_STATUS;

/** Blob ids are ours, random and file-name safe: anything else never reaches a store. */
export const BLOB_ID = /^b_[A-Za-z0-9_-]{22}$/;
export const SHA256_HEX = /^[0-9a-f]{64}$/;
