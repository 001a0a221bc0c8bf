/**
 * write_file's blob content: the bytes of a blob the caller uploaded first, read through the runtime
 * (`ToolContext.blob`), never whole in memory except a text file small enough to show as a diff. Plan: a text
 * blob within the text limit is a unified diff like any write; anything else is described by size, type and
 * sha256 before and after. Apply: streamed into the temp file of an atomic write, hashed on the way, renamed
 * in only when size and sha256 are the blob's (otherwise nothing is written).
 */
import { createHash } from "node:crypto";
import fs from "node:fs";
import type { BlobContent, ToolContext } from "../define.js";
import { writeFileAtomic } from "../atomic-write.js";
import { binaryDiff } from "../diff.js";
import { ToolError } from "../errors.js";
import type { DirHandle } from "../fs-safe.js";
import { openFileIn } from "../safe-read.js";
import { isBinaryContent } from "../text.js";
import { LIMITS, keptMode, plural } from "./common.js";
import { byteCount, hardLinkNote, type CurrentFile } from "./write-helpers.js";

export function blobOf(ctx: ToolContext, id: string): BlobContent {
  const blob = ctx.blob?.(id);
  if (!blob) throw new ToolError("INVALID_INPUT", `The blob ${JSON.stringify(id)} was not given with this call (upload it with POST /api/host/blobs first)`);
  return blob;
}

/** A small text blob's content, checked against its digest; undefined for a binary or large one. */
export async function smallText(blob: BlobContent, signal: AbortSignal | undefined): Promise<string | undefined> {
  if (blob.size > LIMITS.textFileBytes) return undefined;
  const chunks: Buffer[] = [];
  await streamChecked(blob, signal, (chunk) => chunks.push(chunk));
  const bytes = Buffer.concat(chunks);
  return isBinaryContent(bytes) ? undefined : bytes.toString("utf8");
}

/** Reads the blob to its end through `take`, failing (nothing kept by the caller) on a size or digest mismatch. */
async function streamChecked(blob: BlobContent, signal: AbortSignal | undefined, take: (chunk: Buffer) => void): Promise<void> {
  const hash = createHash("sha256");
  let bytes = 0;
  for await (const part of await blob.open(signal)) {
    const chunk = Buffer.from(part.buffer, part.byteOffset, part.byteLength);
    bytes += chunk.length;
    if (bytes > blob.size) break;
    hash.update(chunk);
    take(chunk);
  }
  if (bytes !== blob.size || hash.digest("hex") !== blob.sha256) {
    throw new ToolError("IO_ERROR", `The blob's bytes are not the ${blob.size} bytes with sha256 ${blob.sha256} it was uploaded as; nothing was written`);
  }
}

function sha256Of(dir: DirHandle, name: string): string {
  const file = openFileIn(dir, name);
  try {
    const hash = createHash("sha256");
    const buffer = Buffer.alloc(1024 * 1024);
    for (let read = fs.readSync(file.fd, buffer); read > 0; read = fs.readSync(file.fd, buffer)) hash.update(buffer.subarray(0, read));
    return hash.digest("hex");
  } finally {
    fs.closeSync(file.fd);
  }
}

/** The plan of a binary or large blob: size, type and sha256 before and after. */
export function describeBlob(real: string, dir: DirHandle | undefined, name: string, current: CurrentFile | undefined, blob: BlobContent, missing: string[]) {
  const after = `${byteCount(blob.size)} of ${blob.contentType}, sha256 ${blob.sha256}`;
  const before = current && dir ? `${byteCount(current.size)}, sha256 ${sha256Of(dir, name)}` : undefined;
  let summary = before ? `Overwrite ${real} (${before}) with ${after}` : `Create ${real}: ${after}`;
  if (!current && missing.length) summary += `, creating ${plural(missing.length, "folder")}: ${missing.join(", ")}`;
  summary += hardLinkNote(current);
  const unchanged = before !== undefined && current!.size === blob.size && before.endsWith(blob.sha256);
  return {
    diff: unchanged ? "" : binaryDiff(current ? real : null, real),
    summary: unchanged ? `No change: ${real} already has this content` : summary,
    path: real,
    exists: current !== undefined,
    unchanged,
    bytes: blob.size,
    sha256: blob.sha256,
    contentType: blob.contentType,
    createsDirectories: missing,
  };
}

/** Streams the blob into `name` atomically; the temp file is removed when the bytes are not the blob's. */
export function writeBlob(dir: DirHandle, name: string, blob: BlobContent, current: CurrentFile | undefined, signal: AbortSignal | undefined): Promise<void> {
  return writeFileAtomic(
    dir,
    name,
    async (fd) => {
      await streamChecked(blob, signal, (chunk) => {
        let offset = 0;
        while (offset < chunk.length) offset += fs.writeSync(fd, chunk, offset, chunk.length - offset);
      });
    },
    {
      ...(current ? { mode: keptMode(current), owner: { uid: current.uid, gid: current.gid } } : { expect: "absent" as const }),
      ...(signal ? { signal } : {}),
    },
  );
}
