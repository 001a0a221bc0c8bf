import { PassThrough, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { MeasuredBody } from "./measured-body.js";
import { BLOB_ID, BlobError, type BlobExpectation, type BlobStore } from "./store.js";

export interface S3BlobStoreOptions {
  bucket: string;
  region: string;
  /** An S3-compatible server (MinIO, Ceph, …); AWS when unset. */
  endpoint?: string | undefined;
  forcePathStyle?: boolean;
  /** Default: the SDK's chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, an instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** Keys are `<prefix><blob id>`, so a bucket can be shared (default `tether-blobs/`). */
  prefix?: string;
}

/** `x-amz-checksum-sha256` is kept a header (not hoisted into the query, where S3 ignores it), so S3 checks the digest. */
const CHECKSUM_HEADER = "x-amz-checksum-sha256";

/**
 * The S3 store (several replicas share one bucket): devices upload straight to the bucket through a presigned
 * PUT and downloads are redirected to a presigned GET, so a blob's bytes never pass through a replica. The
 * presigned PUT signs the size and the sha256 (`x-amz-checksum-sha256`): S3 refuses a body that differs, and
 * `stat` confirms the size before the blob is marked complete. Any fault reaching the bucket is 503
 * `BLOB_STORE_UNAVAILABLE`; nothing is cached, so the next request after it is back simply works.
 */
export function createS3BlobStore(options: S3BlobStoreOptions): BlobStore {
  const client = s3Client(options);
  const Bucket = options.bucket;
  const prefix = options.prefix ?? "tether-blobs/";
  const keyOf = (id: string) => {
    if (!BLOB_ID.test(id)) throw new BlobError("BLOB_NOT_FOUND", "No such blob");
    return `${prefix}${id}`;
  };

  return {
    kind: "s3",
    async put(id, body, expect) {
      await putChecked(client, { Bucket, Key: keyOf(id) }, body, expect);
    },
    async open(id, range) {
      try {
        const got = await client.send(new GetObjectCommand({ Bucket, Key: keyOf(id), ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }));
        return got.Body as Readable;
      } catch (error) {
        throw notFoundOr(error);
      }
    },
    async delete(id) {
      await client.send(new DeleteObjectCommand({ Bucket, Key: keyOf(id) })).catch((error: unknown) => {
        throw storeFault(error);
      });
    },
    async *ids() {
      let ContinuationToken: string | undefined;
      do {
        const page = await client
          .send(new ListObjectsV2Command({ Bucket, Prefix: prefix, ...(ContinuationToken ? { ContinuationToken } : {}) }))
          .catch((error: unknown) => {
            throw storeFault(error);
          });
        for (const object of page.Contents ?? []) {
          const id = object.Key?.slice(prefix.length);
          if (id && BLOB_ID.test(id)) yield id;
        }
        ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (ContinuationToken);
    },
    async presignPut(id, expect: BlobExpectation, expiresAt) {
      const sum = checksum(expect.digest);
      const command = new PutObjectCommand({ Bucket, Key: keyOf(id), ContentLength: expect.size, ChecksumSHA256: sum });
      const url = await getSignedUrl(client, command, { expiresIn: secondsUntil(expiresAt), unhoistableHeaders: new Set([CHECKSUM_HEADER]) });
      return { url, headers: { [CHECKSUM_HEADER]: sum } };
    },
    async presignGet(id, expiresAt, download) {
      const disposition = download.fileName ? `attachment; filename*=UTF-8''${encodeURIComponent(download.fileName)}` : undefined;
      const command = new GetObjectCommand({
        Bucket,
        Key: keyOf(id),
        ResponseContentType: download.contentType,
        ...(disposition ? { ResponseContentDisposition: disposition } : {}),
      });
      return getSignedUrl(client, command, { expiresIn: secondsUntil(expiresAt) });
    },
    async stat(id) {
      try {
        const head = await client.send(new HeadObjectCommand({ Bucket, Key: keyOf(id) }));
        return { size: head.ContentLength ?? 0 };
      } catch (error) {
        const fault = notFoundOr(error);
        if (fault.code === "BLOB_NOT_FOUND") return undefined;
        throw fault;
      }
    },
    async close() {
      client.destroy();
    },
  };
}

function s3Client(options: S3BlobStoreOptions): S3Client {
  return new S3Client({
    region: options.region,
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    forcePathStyle: options.forcePathStyle ?? options.endpoint !== undefined,
    ...(options.credentials ? { credentials: options.credentials } : {}),
    // Checksums only where we give them: the SDK's default CRC32 of a presigned URL's empty body would break it.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    // Fail fast to a 503 rather than hold a request while the bucket is unreachable.
    maxAttempts: 2,
  });
}

/** Streams `body` into the object, which S3 keeps only when its size and sha256 are `expect`'s; else nothing stays. */
async function putChecked(client: S3Client, { Bucket, Key }: { Bucket: string; Key: string }, body: Readable, expect: BlobExpectation): Promise<void> {
  const counter = new MeasuredBody(expect);
  const passing = new PassThrough();
  // MeasuredBody checks size and digest before the body ends, so a wrong body aborts the PUT rather than completing it;
  // the bucket failing stops the feeding too (else the request body would wait, unread, until its timeout).
  const sending = client
    .send(new PutObjectCommand({ Bucket, Key, Body: passing, ContentLength: expect.size, ChecksumSHA256: checksum(expect.digest) }))
    .catch((error: unknown) => {
      passing.destroy(error as Error);
      throw error;
    });
  sending.catch(() => {});
  try {
    await pipeline(body, counter, passing);
    await sending;
  } catch (error) {
    passing.destroy();
    await sending.catch(() => {});
    // Whatever landed is not the announced blob: remove it (an S3 that checks the checksum kept nothing anyway).
    await client.send(new DeleteObjectCommand({ Bucket, Key })).catch(() => {});
    throw error instanceof BlobError ? error : storeFault(error);
  }
}

/** A sha256 in hex, as S3's checksum header carries it (base64). */
function checksum(digest: string): string {
  return Buffer.from(digest, "hex").toString("base64");
}

function secondsUntil(when: Date): number {
  return Math.max(1, Math.min(7 * 86_400, Math.ceil((when.getTime() - Date.now()) / 1000)));
}

function notFoundOr(error: unknown): BlobError {
  const name = (error as { name?: string } | undefined)?.name;
  const status = (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
  if (name === "NoSuchKey" || name === "NotFound" || status === 404) return new BlobError("BLOB_NOT_FOUND", "The blob's bytes are gone (expired or deleted)");
  return storeFault(error);
}

/** The bucket unreachable, refusing or failing: the store is unavailable (503) until it is back. */
function storeFault(error: unknown): BlobError {
  if (error instanceof BlobError) return error;
  const detail = (error as { name?: string; code?: string } | undefined)?.code ?? (error as { name?: string } | undefined)?.name ?? "unknown error";
  return new BlobError("BLOB_STORE_UNAVAILABLE", `The blob store (S3) could not be reached or refused the request (${detail}); try again shortly`);
}
