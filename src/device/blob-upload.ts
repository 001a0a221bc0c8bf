import { Value } from "@sinclair/typebox/value";
import { BlobReadSchema, BlobUploadInputSchema, type BlobUploadInput } from "../protocol/index.js";
import { ToolError, type BlobContent, type Scope } from "../tools/index.js";
import { openFileInScope } from "../tools/safe-read.js";
import { fileChunks } from "./file-chunks.js";
import type { DeviceRequest } from "./http.js";

/**
 * The device's side of a blob handle being fetched: the server's `BLOB_UPLOAD_CALL` names a file this
 * device described in a read result and a single-use URL. The path is resolved inside the roots again now,
 * as every read is (a symlink swapped in since the handle was made, pointing outside, is `OUTSIDE_ROOTS`),
 * opened without following a final link, and must still have the size it had; the receiving end checks the
 * digest. The bytes stream from the file to the URL through two reused buffers (`file-chunks.ts`).
 */
export async function uploadBlob(
  scope: Scope,
  input: unknown,
  request: DeviceRequest,
  signal: AbortSignal,
): Promise<{ uploaded: true; size: number; sha256: string }> {
  if (!Value.Check(BlobUploadInputSchema, input)) throw new ToolError("INVALID_INPUT", "The blob upload request is not well formed");
  const upload: BlobUploadInput = input;
  const real = await scope.resolve(upload.path);
  const file = openFileInScope(scope, real);
  // The descriptor is the body's from here: `close` ends it once no read is running.
  const body = fileChunks(file.fd, upload.size);
  try {
    if (file.stat.size !== upload.size) {
      throw new ToolError(
        "FILE_CHANGED",
        `${JSON.stringify(upload.path)} is ${file.stat.size} bytes now, not the ${upload.size} it had when its handle was made; read it again for a new handle`,
      );
    }
    const response = await request(upload.url, {
      method: "PUT",
      headers: { ...upload.headers, "content-type": upload.contentType, "content-length": String(upload.size) },
      body: body.chunks,
      signal,
    });
    const text = await response.text();
    if (!response.ok) {
      const code = /"code"\s*:\s*"([A-Z_]+)"/.exec(text)?.[1];
      // The digest is checked where the bytes land: a mismatch means the file changed under the same size.
      // (A bucket says so in XML: BadDigest.)
      if (code === "BLOB_DIGEST_MISMATCH" || /<Code>BadDigest<\/Code>/.test(text))
        throw new ToolError("FILE_CHANGED", `${JSON.stringify(upload.path)} changed since its handle was made; read it again for a new handle`);
      throw new ToolError("IO_ERROR", `The upload was refused (${response.status}${code ? ` ${code}` : ""})`);
    }
    return { uploaded: true, size: upload.size, sha256: upload.sha256 };
  } finally {
    await body.close();
  }
}

/**
 * The blobs a call's input names, as the server resolved them (`CallEvent.blobs`): a tool reads one through its
 * signed download URL, streamed. Only what arrived beside the call is reachable, so a caller's input can never
 * point the device at an address of its choosing. Size and digest are the tool's to check as it reads.
 */
export function callBlobs(blobs: unknown, request: DeviceRequest): ((id: string) => BlobContent | undefined) | undefined {
  if (blobs === undefined || typeof blobs !== "object" || blobs === null) return undefined;
  return (id) => {
    const entry = (blobs as Record<string, unknown>)[id];
    if (!Value.Check(BlobReadSchema, entry)) return undefined;
    return {
      size: entry.size,
      sha256: entry.sha256,
      contentType: entry.contentType,
      async open(signal) {
        const response = await request(entry.url, { method: "GET", headers: {}, ...(signal ? { signal } : {}) }).catch((error: unknown) => {
          throw new ToolError("IO_ERROR", `The blob could not be downloaded (${(error as Error).message})`);
        });
        if (!response.ok) {
          const text = await response.text().catch(() => "");
          const code = /"code"\s*:\s*"([A-Z_]+)"/.exec(text)?.[1];
          throw new ToolError("IO_ERROR", `The blob could not be downloaded (${response.status}${code ? ` ${code}` : ""})`);
        }
        return response.body;
      },
    };
  };
}
