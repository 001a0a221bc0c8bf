import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { Transform, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { BlobError } from "./store.js";

/** An upload whose size and digest were learnt by reading it: where its bytes wait, and what they are. */
export interface StagedUpload {
  file: string;
  size: number;
  digest: string;
  /** Removes the staging file (idempotent); always call it. */
  discard(): Promise<void>;
}

/** Past `maxBytes` an upload stops at once: `BLOB_TOO_LARGE`, or `BLOB_QUOTA_EXCEEDED` when the owner's room is what ran out. */
export interface StageLimits {
  maxBytes: number;
  /** The owner's room left under the quota (smaller than `maxBytes` or not). */
  roomBytes: number;
}

/**
 * A browser's upload (the /devices write_file form) announces neither its size nor its digest: it is streamed
 * to a staging file under `dir`, counted and hashed on the way, stopped as soon as it passes its limits, and only
 * then made a blob (`BlobService.adopt`), which checks the quota with its real size and puts it into the store.
 * Never whole in memory; a body that fails or is refused leaves no file behind.
 */
export async function stageUpload(dir: string, body: Readable, limits: StageLimits): Promise<StagedUpload> {
  await mkdir(dir, { recursive: true, mode: 0o700 }).catch((error: unknown) => {
    throw stagingFault(error);
  });
  const file = path.join(dir, `upload-${randomBytes(12).toString("hex")}`);
  const discard = () => rm(file, { force: true }).catch(() => {});
  const hash = createHash("sha256");
  let size = 0;
  const cap = Math.min(limits.maxBytes, limits.roomBytes);
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      size += chunk.length;
      if (size > cap) {
        callback(
          cap === limits.maxBytes
            ? new BlobError("BLOB_TOO_LARGE", `A file may be at most ${limits.maxBytes} bytes; this one is larger. Nothing was kept.`)
            : new BlobError(
                "BLOB_QUOTA_EXCEEDED",
                `This file does not fit in the ${Math.max(0, limits.roomBytes)} bytes left of your blob quota. Nothing was kept; blobs expire by themselves.`,
              ),
        );
        return;
      }
      hash.update(chunk);
      callback(null, chunk);
    },
  });
  try {
    await pipeline(body, counter, fs.createWriteStream(file, { flags: "wx", mode: 0o600 }));
  } catch (error) {
    await discard();
    throw error instanceof BlobError ? error : stagingFault(error);
  }
  return { file, size, digest: hash.digest("hex"), discard };
}

/** A full disk is 507; a body that broke off (or any other fault of the body) is the caller's to send again. */
function stagingFault(error: unknown): Error {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOSPC" || code === "EDQUOT") return new BlobError("BLOB_STORE_FULL", "The server's disk is full; nothing was kept. Try again later.");
  return error instanceof Error ? error : new Error(String(error));
}
