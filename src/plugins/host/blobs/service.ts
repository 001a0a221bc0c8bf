import { randomBytes } from "node:crypto";
import fs from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pipeline, Readable, type PassThrough } from "node:stream";
import { liveUploads, type LiveUploads } from "./live-upload.js";
import { removeStaleFiles, STALE_UPLOAD_FILE_MS, UNFINISHED_STAGED_FILE } from "./stale-files.js";
import type { Kysely } from "kysely";
import type { Database } from "../../../db/schema.js";
import type { SignedStateKey } from "../../../crypto/signed-state.js";
import * as repo from "./repository.js";
import { BlobError, SHA256_HEX, type BlobStore, type ByteRange } from "./store.js";
import type { BlobRecord, NewBlob } from "./repository.js";
import { blobUrls, type BlobHandle } from "./urls.js";

export type { BlobHandle };

/** A file whose size and sha256 are known (a staged browser upload). */
type StagedFile = { file: string; size: number; digest: string };

/** Defaults, documented in docs/blobs.md. */
export const DEFAULT_BLOB_RETENTION_MS = 24 * 3_600_000;
export const DEFAULT_BLOB_QUOTA_BYTES = 10 * 1024 ** 3;
export const DEFAULT_BLOB_URL_TTL_MS = 15 * 60_000;
/** The largest blob accepted at all (a quota may be smaller). */
export const MAX_BLOB_BYTES = 64 * 1024 ** 3;

export interface BlobServiceOptions {
  db: Kysely<Database>;
  store: BlobStore;
  key: SignedStateKey;
  /** The server's public base address, for the URLs handed out. */
  baseURL: string;
  retentionMs?: number;
  quotaBytes?: number;
  urlTtlMs?: number;
  /** Where browser uploads wait while they are counted and hashed (`staged-upload.ts`); default the OS's temp folder. */
  stagingDir?: string;
}

export type BlobSpec = Omit<NewBlob, "id" | "expiresAt">;

/**
 * Blobs without HTTP: made (within the owner's quota), handed out as signed URLs, filled once through a
 * single-use upload URL whose bytes must match the announced size and digest, read back whole or by range,
 * and swept after the retention. A store fault is a `BlobError` the routes map to 503/507.
 */
export function createBlobService(options: BlobServiceOptions) {
  const { db, store, key } = options;
  const retentionMs = options.retentionMs ?? DEFAULT_BLOB_RETENTION_MS;
  const quotaBytes = options.quotaBytes ?? DEFAULT_BLOB_QUOTA_BYTES;
  const stagingDir = options.stagingDir ?? path.join(tmpdir(), "tether-blob-staging");
  const { handle, uploadUrl, granted } = blobUrls({ db, key, baseURL: options.baseURL, urlTtlMs: options.urlTtlMs ?? DEFAULT_BLOB_URL_TTL_MS });

  async function create(spec: BlobSpec): Promise<BlobRecord> {
    if (!Number.isSafeInteger(spec.size) || spec.size < 0) throw new BlobError("BLOB_SIZE_MISMATCH", "A blob's size is a whole number of bytes");
    if (!SHA256_HEX.test(spec.digest)) throw new BlobError("BLOB_DIGEST_MISMATCH", "A blob's digest is a sha256 in lower-case hex");
    if (spec.size > Math.min(MAX_BLOB_BYTES, quotaBytes)) {
      throw new BlobError("BLOB_TOO_LARGE", `A blob may be at most ${Math.min(MAX_BLOB_BYTES, quotaBytes)} bytes; this one is ${spec.size}`);
    }
    const blob: NewBlob = { ...spec, id: `b_${randomBytes(16).toString("base64url")}`, expiresAt: new Date(Date.now() + retentionMs) };
    if (!(await repo.insertWithinQuota(db, blob, quotaBytes))) {
      const used = await repo.usage(db, spec.userId);
      throw new BlobError(
        "BLOB_QUOTA_EXCEEDED",
        `Your blobs take ${used} of your ${quotaBytes} bytes; this one (${spec.size}) does not fit. Blobs expire after ${Math.round(retentionMs / 3_600_000)} h.`,
      );
    }
    return { ...blob, createdAt: new Date(), complete: false };
  }

  /** The blob's row, if `userId` owns it (another user's blob is "not found", as devices are). */
  async function owned(userId: string, id: string): Promise<BlobRecord> {
    const blob = await repo.findBlob(db, id);
    if (!blob || blob.userId !== userId || blob.expiresAt.getTime() <= Date.now())
      throw new BlobError("BLOB_NOT_FOUND", "You have no blob with this id (it may have expired)");
    return blob;
  }

  /**
   * An upload through a signed URL: used once (a second use, or a URL replaced by a newer one, is refused),
   * kept only if the bytes match. A failed upload leaves the blob incomplete: a new upload URL starts over.
   */
  async function receive(id: string, token: string | undefined, body: Readable, callerUserId?: string): Promise<BlobRecord> {
    const { blob, nonce } = await granted(id, token, "put", callerUserId);
    if (blob.complete) throw new BlobError("BLOB_URL_USED", "This blob is already complete; the upload URL was used");
    if (!nonce || !(await repo.claimUpload(db, id, nonce)))
      throw new BlobError("BLOB_URL_USED", "This upload URL was already used (or replaced by a newer one)");
    await putTeed(
      live,
      blob,
      body,
      () => store.put(id, body, { size: blob.size, digest: blob.digest }),
      (teed) => store.put(id, teed, { size: blob.size, digest: blob.digest }),
      () => repo.markComplete(db, id),
    );
    return { ...blob, complete: true };
  }

  /** Checks a direct upload (to a bucket) landed whole, and marks the blob complete. */
  async function confirmDirect(blob: BlobRecord): Promise<boolean> {
    const stored = await store.stat?.(blob.id);
    if (!stored || stored.size !== blob.size) return false;
    await repo.markComplete(db, blob.id);
    return true;
  }

  const adopt = (spec: Omit<BlobSpec, "size" | "digest">, staged: StagedFile) => adoptStaged(db, store, create, spec, staged);

  const fromDevice = deviceFetches(db);
  const live = liveUploads();

  const follow = (blob: BlobRecord) => followUpload(live, fromDevice.fetch, blob);

  async function open(blob: BlobRecord, range?: ByteRange): Promise<Readable> {
    if (!blob.complete) throw new BlobError("BLOB_INCOMPLETE", "This blob's upload did not complete; ask for it again to start over");
    return store.open(blob.id, range);
  }

  async function deleteForDevice(deviceId: string): Promise<void> {
    await removeBytes(store, await repo.deleteForDevice(db, deviceId));
  }

  return {
    store,
    retentionMs,
    quotaBytes,
    stagingDir,
    adopt,
    setDeviceFetcher: fromDevice.set,
    fetchFromDevice: fromDevice.fetch,
    follow,
    create,
    owned,
    handle,
    uploadUrl,
    granted,
    receive,
    confirmDirect,
    open,
    sweep: () => sweepBlobs(db, store, stagingDir),
    deleteForDevice,
    findBlob: (id: string) => repo.findBlob(db, id),
    usage: (userId: string) => repo.usage(db, userId),
  };
}

export type BlobService = ReturnType<typeof createBlobService>;

/** Why a streamed download is cut: the bytes' own mismatch, a device gone before its body ended (incomplete), or the store's fault. */
function liveFailure(error: unknown, body: Readable): Error {
  if (error instanceof BlobError && error.code !== "BLOB_STORE_UNAVAILABLE") return error;
  if (!body.readableEnded) return new BlobError("BLOB_INCOMPLETE", "The device stopped before the upload completed; fetch the URL again to start over");
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * A staged upload (its size and digest learnt by reading it) made a complete blob of its owner's: the quota
 * checked with its real size, the bytes put into the store (which checks them once more). A failure keeps no row
 * and no bytes. The staging file is the caller's to discard.
 */
async function adoptStaged(
  db: Kysely<Database>,
  store: BlobStore,
  create: (spec: BlobSpec) => Promise<BlobRecord>,
  spec: Omit<BlobSpec, "size" | "digest">,
  staged: StagedFile,
): Promise<BlobRecord> {
  const blob = await create({ ...spec, size: staged.size, digest: staged.digest });
  try {
    await store.put(blob.id, fs.createReadStream(staged.file), { size: blob.size, digest: blob.digest });
    await repo.markComplete(db, blob.id);
  } catch (error) {
    await repo.deleteBlob(db, blob.id).catch(() => {});
    throw error;
  }
  return { ...blob, complete: true };
}

/**
 * An incomplete device blob's first download: a stream of its bytes as the device uploads them (`live-upload.ts`)
 * when the upload reaches this replica, else (an upload already under way, or one that went elsewhere) the blob
 * once complete. A refusal before the upload starts rejects, as the device fetch does.
 */
async function followUpload(live: LiveUploads, fetchFromDevice: (blob: BlobRecord) => Promise<BlobRecord>, blob: BlobRecord): Promise<Readable | BlobRecord> {
  const waiter = live.wait(blob.id);
  const fetched = fetchFromDevice(blob);
  try {
    const first = await Promise.race([waiter.stream, fetched]);
    if (!(first instanceof Readable)) return first;
    // A call that fails after the upload began (the device gone): the stream is cut, unless it is already whole.
    fetched.catch((error: unknown) => {
      if (!(first as PassThrough).writableEnded) first.destroy(error instanceof Error ? error : new Error(String(error)));
    });
    return first;
  } finally {
    waiter.cancel();
  }
}

/**
 * Puts an upload into the store and marks it complete; downloads waiting for the blob get the bytes as they arrive
 * (`live-upload.ts`), the last chunk only once verified and complete, and an aborted stream otherwise.
 */
async function putTeed(
  live: LiveUploads,
  blob: BlobRecord,
  body: Readable,
  plain: () => Promise<void>,
  teed: (stream: Readable) => Promise<void>,
  complete: () => Promise<void>,
): Promise<void> {
  const tee = live.start(blob.id, blob.size);
  if (!tee) {
    await plain();
    await complete();
    return;
  }
  try {
    await teed(pipeline(body, tee, () => {}));
    await complete();
  } catch (error) {
    tee.abort(liveFailure(error, body));
    throw error;
  }
  tee.release();
}

async function removeBytes(store: BlobStore, ids: string[]): Promise<void> {
  for (const id of ids) await store.delete(id).catch(() => {});
}

/**
 * Expired blobs, those of revoked devices and deactivated owners, bytes whose row is gone, and the files of uploads
 * that stopped long ago (`stale-files.ts`: a process killed mid-upload leaves them; a live upload's are never old).
 */
async function sweepBlobs(db: Kysely<Database>, store: BlobStore, stagingDir: string): Promise<{ deleted: number; orphans: number; unfinished: number }> {
  let deleted = 0;
  for (let batch = 0; batch < 20; batch++) {
    const ids = await repo.deleteStale(db);
    await removeBytes(store, ids);
    deleted += ids.length;
    if (ids.length < 500) break;
  }
  const orphans: string[] = [];
  let page: string[] = [];
  const flush = async () => {
    const kept = await repo.existing(db, page);
    orphans.push(...page.filter((id) => !kept.has(id)));
    page = [];
  };
  for await (const id of store.ids()) {
    page.push(id);
    if (page.length >= 500) await flush();
  }
  await flush();
  await removeBytes(store, orphans);
  const unfinished = (await store.sweepUnfinished?.(STALE_UPLOAD_FILE_MS)) ?? 0;
  return { deleted, orphans: orphans.length, unfinished: unfinished + (await removeStaleFiles(stagingDir, UNFINISHED_STAGED_FILE, STALE_UPLOAD_FILE_MS)) };
}

/** How an incomplete device blob gets its bytes (the host plugin sets the fetcher); one attempt per blob at a time. */
function deviceFetches(db: Kysely<Database>) {
  let fetcher: ((blob: BlobRecord) => Promise<void>) | undefined;
  const inFlight = new Map<string, Promise<BlobRecord>>();
  function fetch(blob: BlobRecord): Promise<BlobRecord> {
    if (!blob.deviceId || !fetcher) return Promise.reject(new BlobError("BLOB_INCOMPLETE", "This blob's bytes were never uploaded"));
    let attempt = inFlight.get(blob.id);
    if (!attempt) {
      const run = fetcher;
      attempt = (async () => {
        const failure = await run(blob).then(
          () => undefined,
          (error: unknown) => ({ error }),
        );
        const fresh = await repo.findBlob(db, blob.id);
        if (fresh?.complete) return fresh;
        // A failed attempt is forgiven only when another replica's upload completed the blob meanwhile (this
        // attempt's URL then finds it complete, and the device reports a refusal): the bytes are there.
        if (failure) throw failure.error;
        throw new BlobError("BLOB_INCOMPLETE", "The device did not finish uploading this blob; ask for it again to start over");
      })().finally(() => inFlight.delete(blob.id));
      inFlight.set(blob.id, attempt);
    }
    return attempt;
  }
  return { fetch, set: (fn: (blob: BlobRecord) => Promise<void>) => (fetcher = fn) };
}
