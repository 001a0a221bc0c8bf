import { createHash } from "node:crypto";
import { Transform } from "node:stream";
import { BlobError, type BlobExpectation } from "./store.js";

/**
 * Counts and hashes the bytes passing through to a store. More than announced stops the upload at once (a body
 * that would never match is not written to its end), and a body whose size or sha256 differs from what was
 * announced fails before it ends, so the store's write fails with it and keeps nothing (the S3 PUT aborts).
 */
export class MeasuredBody extends Transform {
  private readonly hash = createHash("sha256");
  bytes = 0;

  constructor(
    private readonly expect: BlobExpectation,
    highWaterMark?: number,
  ) {
    super(highWaterMark ? { highWaterMark } : {});
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null, data?: Buffer) => void): void {
    this.bytes += chunk.length;
    if (this.bytes > this.expect.size) {
      callback(new BlobError("BLOB_SIZE_MISMATCH", `The body is longer than the announced ${this.expect.size} bytes; nothing was kept`));
      return;
    }
    this.hash.update(chunk);
    callback(null, chunk);
  }

  override _flush(callback: (error?: Error | null) => void): void {
    if (this.bytes !== this.expect.size)
      callback(new BlobError("BLOB_SIZE_MISMATCH", `The body is ${this.bytes} bytes, not the announced ${this.expect.size}; nothing was kept`));
    else if (this.hash.digest("hex") !== this.expect.digest)
      callback(new BlobError("BLOB_DIGEST_MISMATCH", "The body's sha256 is not the announced digest; nothing was kept"));
    else callback();
  }
}
