import { Type } from "@sinclair/typebox";
import { createHash } from "node:crypto";
import fs from "node:fs";
import { defineLocalTool } from "../define.js";
import { ToolError, throwIfAborted } from "../errors.js";
import { openFileInScope, readHeadSync } from "../safe-read.js";
import { guessFileType, hasNulByte, isBinaryContent } from "../text.js";
import { LIMITS, fenceFor, isoTime, pathField } from "./common.js";

const CHUNK = 64 * 1024;
/** Below this size the whole file is scanned so totalLines can be reported. */
const COUNT_LINES_UP_TO = 8 * 1024 * 1024;

export function readAt(fd: number, buffer: Buffer, position: number): Promise<number> {
  return new Promise((resolve, reject) => fs.read(fd, buffer, 0, buffer.length, position, (error, n) => (error ? reject(error) : resolve(n))));
}

export async function hashFd(fd: number, algorithm: "sha256" | "md5", signal?: AbortSignal): Promise<string> {
  const hash = createHash(algorithm);
  const buffer = Buffer.allocUnsafe(1024 * 1024);
  for (let position = 0; ; ) {
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
    "Read a UTF-8 text file, optionally a range of lines (startLine and endLine, 1-based, inclusive). Returns at most 1 MB, cut at a line boundary, and reports truncation with the bytes left out and the next line to read. A binary file yields its size, a type guess and its sha256 instead of content.",
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
      const size = file.stat.size;
      const binary = async () => {
        const head = readHeadSync(file.fd, 512);
        return {
          path: real,
          binary: true,
          size,
          ...guessFileType(head),
          sha256: await hashFd(file.fd, "sha256", ctx.signal),
          modified: isoTime(file.stat.mtimeMs),
        };
      };
      if (hasNulByte(readHeadSync(file.fd, 8000))) return await binary();

      const limit = LIMITS.readBytes;
      const out = Buffer.allocUnsafe(limit);
      let outBytes = 0;
      let lineStartOut = 0; // outBytes when the current line started
      let line = 1; // number of the line the next byte belongs to
      let returnedEnd = start - 1;
      let truncated = false;
      let lastLineCut = false;
      let omittedBytes = 0;
      let cutOffset = -1; // file offset of the first byte left out
      let lastByte = -1;
      let reachedEof = false;
      const countToEof = size <= COUNT_LINES_UP_TO;
      const chunk = Buffer.allocUnsafe(CHUNK);
      let position = 0;
      reading: for (;;) {
        throwIfAborted(ctx.signal);
        const n = await readAt(file.fd, chunk, position);
        if (n === 0) {
          reachedEof = true;
          break;
        }
        const view = chunk.subarray(0, n);
        lastByte = view[n - 1]!;
        for (let i = 0; i < n; ) {
          const nl = view.indexOf(10, i);
          const segEnd = nl === -1 ? n : nl + 1;
          const inRange = line >= start && (end === undefined || line <= end);
          if (inRange) {
            const seg = view.subarray(i, segEnd);
            if (truncated) {
              omittedBytes += seg.length;
            } else if (outBytes + seg.length <= limit) {
              seg.copy(out, outBytes);
              outBytes += seg.length;
              returnedEnd = line;
            } else {
              truncated = true;
              if (lineStartOut > 0) {
                // Whole lines fit before this one: stop at the line boundary.
                omittedBytes += outBytes - lineStartOut + seg.length;
                cutOffset = position + i - (outBytes - lineStartOut);
                outBytes = lineStartOut;
                returnedEnd = line - 1;
              } else {
                // One line longer than the limit: return its start, cut on a character boundary. `out` holds
                // only this line so far, so the boundary may fall in what was already copied.
                const byteAt = (k: number) => (k < outBytes ? out[k]! : seg[k - outBytes]!);
                let cut = limit;
                while (cut > 0 && (byteAt(cut) & 0xc0) === 0x80) cut--;
                if (cut > outBytes) seg.copy(out, outBytes, 0, cut - outBytes);
                omittedBytes += outBytes + seg.length - cut;
                cutOffset = position + i + (cut - outBytes);
                outBytes = cut;
                returnedEnd = line;
                lastLineCut = true;
              }
              if (end === undefined && !countToEof) {
                omittedBytes = size - cutOffset;
                break reading;
              }
            }
          }
          if (nl !== -1) {
            line++;
            lineStartOut = outBytes;
          }
          i = segEnd;
          if (end !== undefined && line > end && !countToEof) break reading;
        }
        position += n;
      }
      const content = out.subarray(0, outBytes);
      if (isBinaryContent(content)) return await binary();
      const totalLines = reachedEof ? (size === 0 ? 0 : lastByte === 10 ? line - 1 : line) : undefined;
      return {
        path: real,
        size,
        encoding: "utf-8",
        startLine: start,
        endLine: returnedEnd,
        ...(totalLines !== undefined ? { totalLines } : {}),
        content: fenceFor(ctx, content.toString("utf8"), `file ${real}`),
        truncated,
        limit,
        omittedBytes,
        ...(truncated ? { nextStartLine: returnedEnd + 1 } : {}),
        ...(lastLineCut ? { lastLineTruncated: true } : {}),
        modified: isoTime(file.stat.mtimeMs),
      };
    } finally {
      fs.closeSync(file.fd);
    }
  },
});
