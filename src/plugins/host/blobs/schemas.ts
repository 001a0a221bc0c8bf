import { Type } from "@sinclair/typebox";

/** A blob as every API shows it (`POST /api/host/calls` results, uploads): `url` downloads it until `expiresAt`. */
export const BlobHandleJson = Type.Object({
  id: Type.String(),
  size: Type.Number(),
  digest: Type.String({ description: "sha256, hex; also the download's ETag" }),
  contentType: Type.String(),
  url: Type.String(),
  expiresAt: Type.String({ format: "date-time" }),
});

/** `POST /api/host/blobs`: the blob, and the single-use URL to PUT its bytes to. */
export const BlobUploadJson = Type.Object({
  blob: BlobHandleJson,
  upload: Type.Object({ url: Type.String(), expiresAt: Type.String({ format: "date-time" }) }),
});
