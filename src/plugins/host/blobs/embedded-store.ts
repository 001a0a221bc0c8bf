import { randomBytes } from "node:crypto";
import fs from "node:fs";
import { mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { ParallelFileWriter } from "./file-writer.js";
import { MeasuredBody } from "./measured-body.js";
import { removeStaleFiles, UNFINISHED_STORE_FILE } from "./stale-files.js";
import { BLOB_ID, BlobError, type BlobStore } from "./store.js";

/**
 * How much of an upload may wait between its stages (hashing, the file): a 64 KB socket read passes without
 * every stage pausing the next (Node's 16 KB default), still bounded per upload.
 */
const UPLOAD_BUFFER_BYTES = 1024 * 1024;
/**
 * File writes kept going at once (`file-writer.ts`). Not more buffering: with 8 MB per stage instead of 1 MB the
 * server fell into back-to-back mark-compacts (V8 collecting the upload's ArrayBuffers) in 4 runs of 4, doubling
 * its CPU per GiB; at 1 MB, in about 1 run of 4.
 */
const UPLOAD_WRITES_IN_FLIGHT = 4;

/**
 * The embedded blob store: one file per blob under `dir` (by default `DATA_DIR/blobs`). An upload is
 * streamed into `dir/tmp`, hashed on the way, and renamed into place only when its size and digest are
 * the announced ones, so a reader never sees a partial blob and a refused or broken upload leaves
 * nothing behind. One replica only: another replica would not see these files (use the S3 store).
 */
export function createEmbeddedBlobStore(dir: string): BlobStore {
  const tmp = path.join(dir, "tmp");
  let ready: Promise<unknown> | undefined;
  const ensureDirs = () => (ready ??= mkdir(tmp, { recursive: true, mode: 0o700 }));
  const fileOf = (id: string) => {
    if (!BLOB_ID.test(id)) throw new BlobError("BLOB_NOT_FOUND", "No such blob");
    return path.join(dir, id);
  };

  return {
    kind: "embedded",
    async put(id, body, expect) {
      const target = fileOf(id);
      await ensureDirs().catch((error: unknown) => {
        throw storeFault(error);
      });
      const temp = path.join(tmp, `${id}.${randomBytes(6).toString("hex")}`);
      const counter = new MeasuredBody(expect, UPLOAD_BUFFER_BYTES);
      try {
        await pipeline(
          body,
          counter,
          new ParallelFileWriter(temp, { flags: "wx", mode: 0o600, inFlight: UPLOAD_WRITES_IN_FLIGHT, highWaterMark: UPLOAD_BUFFER_BYTES }),
        );
        await rename(temp, target);
      } catch (error) {
        await rm(temp, { force: true }).catch(() => {});
        throw error instanceof BlobError ? error : storeFault(error);
      }
    },
    async open(id, range) {
      const file = fileOf(id);
      // Opened before it is returned, so a missing blob is an error here, not on the stream.
      const handle = await fs.promises.open(file, "r").catch((error: NodeJS.ErrnoException) => {
        throw error.code === "ENOENT" ? new BlobError("BLOB_NOT_FOUND", "The blob's bytes are gone (expired or deleted)") : storeFault(error);
      });
      return handle.createReadStream(range ? { start: range.start, end: range.end, highWaterMark: 256 * 1024 } : { highWaterMark: 256 * 1024 });
    },
    async delete(id) {
      await rm(fileOf(id), { force: true });
    },
    async *ids() {
      const names = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return [] as string[];
        throw error;
      });
      for (const name of names) if (BLOB_ID.test(name)) yield name;
    },
    sweepUnfinished: (olderThanMs) => removeStaleFiles(tmp, UNFINISHED_STORE_FILE, olderThanMs),
    async stat(id) {
      const info = await stat(fileOf(id)).catch(() => undefined);
      return info ? { size: info.size } : undefined;
    },
  };
}

/** A full disk is the operator's to fix (507); any other file-system fault is the store being unavailable (503). */
function storeFault(error: unknown): BlobError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOSPC" || code === "EDQUOT")
    return new BlobError("BLOB_STORE_FULL", "The blob store's disk is full; nothing was kept. Free space or raise the quota, then try again.");
  return new BlobError("BLOB_STORE_UNAVAILABLE", `The blob store could not be used (${code ?? "unknown error"}); try again shortly`);
}
