import { Type, type Static } from "@sinclair/typebox";

/**
 * Blobs between a device and the server (issue 28). A read tool whose file is too large to return whole,
 * or binary, adds a `blobSource` to its result: the file's real path, size, sha256 and content type. The
 * server turns it into a blob handle (`blob: { id, size, digest, contentType, url, expiresAt }`) and asks
 * nothing more until someone fetches the handle's URL; then it sends the device a call to the reserved
 * `BLOB_UPLOAD_CALL` with a single-use upload URL, and the device streams the file's bytes there.
 *
 * Capability: only a device that can upload puts a `blobSource` in its results, so an older device is
 * never sent `BLOB_UPLOAD_CALL` (its reads simply carry no handle). The name has a dot, which the tool-name
 * rule forbids, so it can never collide with a tool, and the server never accepts it from a caller.
 */
export const BLOB_UPLOAD_CALL = "tether.blob-upload";

export const BlobSourceSchema = Type.Object(
  {
    path: Type.String({ minLength: 1, maxLength: 4096 }),
    size: Type.Integer({ minimum: 0 }),
    sha256: Type.String({ pattern: "^[0-9a-f]{64}$" }),
    contentType: Type.String({ minLength: 1, maxLength: 200 }),
  },
  { additionalProperties: false },
);
export type BlobSource = Static<typeof BlobSourceSchema>;

/** The input of a `BLOB_UPLOAD_CALL`: which file, what it must still be, and where its bytes go. */
export const BlobUploadInputSchema = Type.Object(
  {
    blobId: Type.String({ minLength: 1, maxLength: 100 }),
    path: Type.String({ minLength: 1, maxLength: 4096 }),
    size: Type.Integer({ minimum: 0 }),
    sha256: Type.String({ pattern: "^[0-9a-f]{64}$" }),
    contentType: Type.String({ minLength: 1, maxLength: 200 }),
    /** The single-use upload URL (the server's, or a bucket's presigned PUT). */
    url: Type.String({ minLength: 1, maxLength: 8192 }),
    /**
     * Headers the PUT must carry because the URL was signed with them (a bucket's `x-amz-checksum-sha256`,
     * so the bucket refuses other bytes). Only `x-amz-*` names: they cannot replace the length or type.
     */
    headers: Type.Optional(Type.Record(Type.String({ pattern: "^x-amz-[a-z0-9-]{1,60}$" }), Type.String({ maxLength: 512 }), { maxProperties: 8 })),
  },
  { additionalProperties: false },
);
export type BlobUploadInput = Static<typeof BlobUploadInputSchema>;

/**
 * A blob a tool call may read (write_file's `blob` content): the caller names the blob by id in the input; the
 * server, after checking the caller owns it and it is complete, sends this beside the call (never in the input,
 * so no caller can make a device fetch an address of its choosing): a signed download URL and what the bytes
 * must be. The device checks size and sha256 as it reads.
 */
export const BlobReadSchema = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 8192 }),
    size: Type.Integer({ minimum: 0 }),
    sha256: Type.String({ pattern: "^[0-9a-f]{64}$" }),
    contentType: Type.String({ minLength: 1, maxLength: 200 }),
  },
  { additionalProperties: false },
);
export type BlobRead = Static<typeof BlobReadSchema>;

/** True when `value` is a result carrying a well-formed `blobSource`. */
export function blobSourceOf(value: unknown): BlobSource | undefined {
  const source = (value as { blobSource?: unknown } | null)?.blobSource as Partial<BlobSource> | undefined;
  if (!source || typeof source !== "object") return undefined;
  const { path, size, sha256, contentType } = source;
  if (typeof path !== "string" || typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) return undefined;
  if (typeof sha256 !== "string" || !/^[0-9a-f]{64}$/.test(sha256) || typeof contentType !== "string") return undefined;
  return { path, size, sha256, contentType };
}
