import { Type } from "@sinclair/typebox";
import { createHash } from "node:crypto";
import fs from "node:fs";
import { defineLocalTool } from "../define.js";
import { ToolError, throwIfAborted } from "../errors.js";
import { openFileInScope, readHeadSync } from "../safe-read.js";
import { guessFileType, hasNulByte, isBinaryContent } from "../text.js";
import { LIMITS, isoTime, pathField } from "./common.js";

const CHUNK = 64 * 1024;
/** Below this size the whole file is scanned so totalLines can be reported. */
const COUNT_LINES_UP_TO = 8 * 1024 * 1024;

export function readAt(fd: number, buffer: Buffer, position: number): Promise<number> {
  return new Promise((resolve, reject) => fs.read(fd, buffer, 0, buffer.length, position, (error, n) => (error ? reject(error) : resolve(n))));
}

export async function hashFd(fd: number, algorithm: "sha256" | "md5", signal?: AbortSignal): Promise<string> {
  const hash = createHash(algorithm);
  const buffer = Buffer.allocUnsafe(1024 * 1024);
  for (let position = 0; ;) {
    throwIfAborted(signal);
    const n = await readAt(fd, buffer, position);
    if (n === 0) break;
    hash.update(buffer.subarray(0, n));
    position += n;
  }
  return hash.digest("hex");
}

export const readFile = defineLocalTool({
  name: "read_file",
  description:
    "Read a UTF-8 text file, optionally a range of lines (startLine and endLine, 1-based, inclusive). Returns at most 1 MB, cut at a line boundary, and reports truncation with the bytes left out and the next line to read. A binary file yields its size, a type guess and its sha256 instead of content. A truncated or binary file also gets a download handle for the whole file (blob).",
  input: Type.Object(
    {
      path: pathField("File to read"),
      startLine: Type.Optional(Type.Integer({ minimum: 1, description: "First line to return (1-based, default 1)" })),
      endLine: Type.Optional(Type.Integer({ minimum: 1, description: "Last line to return, inclusive (default: end of file)" })),
    },
    { additionalProperties: false },
  ),
  class: "read",
  async run(input, ctx) {
    const start = input.startLine ?? 1;
    const end = input.endLine;
    if (end !== undefined && end < start) {
      throw new ToolError("INVALID_INPUT", `Invalid "endLine": ${end} is before startLine ${start}`, { field: "endLine" });
    }
    const real = await ctx.scope.resolve(input.path);
    const file = openFileInScope(ctx.scope, real);
    try {
      if (hasNulByte(readHeadSync(file.fd, 8000))) return await binaryResult(file, real, ctx.signal);
      const range = new LineRange(start, end, file.stat.size);
      await range.read(file.fd, ctx.signal);
      const content = range.content();
      // Binary content past the first 8000 bytes shows up only now.
      if (isBinaryContent(content)) return await binaryResult(file, real, ctx.signal);
      const totalLines = range.totalLines();
      return {
        path: real,
        size: file.stat.size,
        encoding: "utf-8",
        startLine: start,
        endLine: range.returnedEnd,
        ...(totalLines !== undefined ? { totalLines } : {}),
        content: content.toString("utf8"),
        truncated: range.truncated,
        limit: LIMITS.readBytes,
        omittedBytes: range.omittedBytes,
        ...(range.truncated ? { nextStartLine: range.returnedEnd + 1 } : {}),
        ...(range.lastLineCut ? { lastLineTruncated: true } : {}),
        modified: isoTime(file.stat.mtimeMs),
        // The whole file, for a handle the server makes (the bytes move only when the handle is fetched).
        ...(range.truncated
          ? { blobSource: { path: real, size: file.stat.size, sha256: await hashFd(file.fd, "sha256", ctx.signal), contentType: "text/plain; charset=utf-8" } }
          : {}),
      };
    } finally {
      fs.closeSync(file.fd);
    }
  },
});

/** A binary file: its size, a guess at its type and its sha256 instead of its content. */
async function binaryResult(file: { fd: number; stat: fs.Stats }, real: string, signal: AbortSignal | undefined) {
  const head = readHeadSync(file.fd, 512);
  const type = guessFileType(head);
  const sha256 = await hashFd(file.fd, "sha256", signal);
  return {
    path: real,
    binary: true,
    size: file.stat.size,
    ...type,
    sha256,
    modified: isoTime(file.stat.mtimeMs),
    // Its bytes, for a handle the server makes (uploaded only when the handle is fetched).
    blobSource: { path: real, size: file.stat.size, sha256, contentType: type.mime },
  };
}

/**
 * Lines `start` to `end` of a file, read in chunks into at most `LIMITS.readBytes`: cut at a line
 * boundary when whole lines fit before the limit, else (one line longer than the limit) on a
 * character boundary. What was left out is counted; a file small enough is read to its end so its
 * line count can be reported.
 */
class LineRange {
  private readonly limit = LIMITS.readBytes;
  private readonly out = Buffer.allocUnsafe(this.limit);
  private outBytes = 0;
  /** `outBytes` when the current line started. */
  private lineStartOut = 0;
  /** Number of the line the next byte belongs to. */
  private line = 1;
  returnedEnd: number;
  truncated = false;
  lastLineCut = false;
  omittedBytes = 0;
  /** File offset of the first byte left out. */
  private cutOffset = -1;
  private lastByte = -1;
  private reachedEof = false;
  private readonly countToEof: boolean;

  constructor(
    private readonly start: number,
    private readonly end: number | undefined,
    private readonly size: number,
  ) {
    this.returnedEnd = start - 1;
    this.countToEof = size <= COUNT_LINES_UP_TO;
  }

  async read(fd: number, signal: AbortSignal | undefined): Promise<void> {
    const chunk = Buffer.allocUnsafe(CHUNK);
    for (let position = 0; ;) {
      throwIfAborted(signal);
      const n = await readAt(fd, chunk, position);
      if (n === 0) {
        this.reachedEof = true;
        return;
      }
      const view = chunk.subarray(0, n);
      this.lastByte = view[n - 1]!;
      if (this.scan(view, position)) return;
      position += n;
    }
  }

  content(): Buffer {
    return this.out.subarray(0, this.outBytes);
  }

  /** Known only when the file was read to its end. */
  totalLines(): number | undefined {
    if (!this.reachedEof) return undefined;
    if (this.size === 0) return 0;
    return this.lastByte === 10 ? this.line - 1 : this.line;
  }

  /** One chunk, read at `position`, line by line; true when nothing after it is needed. */
  private scan(view: Buffer, position: number): boolean {
    for (let i = 0; i < view.length;) {
      const nl = view.indexOf(10, i);
      const segEnd = nl === -1 ? view.length : nl + 1;
      const inRange = this.line >= this.start && (this.end === undefined || this.line <= this.end);
      if (inRange && this.take(view.subarray(i, segEnd), position + i)) return true;
      if (nl !== -1) {
        this.line++;
        this.lineStartOut = this.outBytes;
      }
      i = segEnd;
      if (this.end !== undefined && this.line > this.end && !this.countToEof) return true;
    }
    return false;
  }

  /** A piece of a wanted line, found at file offset `offset`: kept, or (past the limit) counted. True when nothing after it is needed. */
  private take(seg: Buffer, offset: number): boolean {
    if (this.truncated) {
      this.omittedBytes += seg.length;
      return false;
    }
    if (this.outBytes + seg.length <= this.limit) {
      seg.copy(this.out, this.outBytes);
      this.outBytes += seg.length;
      this.returnedEnd = this.line;
      return false;
    }
    this.truncated = true;
    if (this.lineStartOut > 0) this.cutAtLineStart(seg, offset);
    else this.cutInsideLine(seg, offset);
    if (this.end === undefined && !this.countToEof) {
      this.omittedBytes = this.size - this.cutOffset;
      return true;
    }
    return false;
  }

  /** Whole lines fit before this one: stop at the line boundary. */
  private cutAtLineStart(seg: Buffer, offset: number): void {
    this.omittedBytes += this.outBytes - this.lineStartOut + seg.length;
    this.cutOffset = offset - (this.outBytes - this.lineStartOut);
    this.outBytes = this.lineStartOut;
    this.returnedEnd = this.line - 1;
  }

  /**
   * One line longer than the limit: return its start, cut on a character boundary. `out` holds only
   * this line so far, so the boundary may fall in what was already copied.
   */
  private cutInsideLine(seg: Buffer, offset: number): void {
    const { out, outBytes, limit } = this;
    const byteAt = (k: number) => (k < outBytes ? out[k]! : seg[k - outBytes]!);
    let cut = limit;
    while (cut > 0 && (byteAt(cut) & 0xc0) === 0x80) cut--;
    if (cut > outBytes) seg.copy(out, outBytes, 0, cut - outBytes);
    this.omittedBytes += outBytes + seg.length - cut;
    this.cutOffset = offset + (cut - outBytes);
    this.outBytes = cut;
    this.returnedEnd = this.line;
    this.lastLineCut = true;
  }
}
