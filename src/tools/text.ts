/** Text and content sniffing shared by the read and edit tools. */
import { isUtf8 } from "node:buffer";

/** Git's heuristic: a NUL byte in the first 8000 bytes makes a file binary. */
export const BINARY_SNIFF_BYTES = 8000;

export function hasNulByte(buffer: Buffer, limit = BINARY_SNIFF_BYTES): boolean {
  const index = buffer.indexOf(0);
  return index !== -1 && index < limit;
}

/** Binary for our purposes: a NUL early on, or bytes that are not UTF-8. */
export function isBinaryContent(buffer: Buffer): boolean {
  return hasNulByte(buffer) || !isUtf8(buffer);
}

/** Length of the longest prefix of `buffer` (at most `max` bytes) that ends on a UTF-8 character boundary. */
export function utf8BoundaryAtOrBefore(buffer: Buffer, max: number): number {
  if (max >= buffer.length) return buffer.length;
  let end = max;
  // Back off continuation bytes (10xxxxxx) so a multi-byte character is never split.
  while (end > 0 && (buffer[end]! & 0xc0) === 0x80) end--;
  return end;
}

/** Cuts a string to at most `maxBytes` of UTF-8, on a character boundary. */
export function truncateUtf8(text: string, maxBytes: number): { text: string; omittedBytes: number } {
  const total = Buffer.byteLength(text);
  if (total <= maxBytes) return { text, omittedBytes: 0 };
  const buffer = Buffer.from(text);
  const end = utf8BoundaryAtOrBefore(buffer, maxBytes);
  return { text: buffer.subarray(0, end).toString("utf8"), omittedBytes: total - end };
}

export type LineEndings = "lf" | "crlf" | "mixed" | "none";

export function detectLineEndings(text: string): LineEndings {
  let crlf = 0;
  let lf = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) {
    if (i > 0 && text.charCodeAt(i - 1) === 13) crlf++;
    else lf++;
  }
  if (crlf === 0 && lf === 0) return "none";
  if (crlf === 0) return "lf";
  if (lf === 0) return "crlf";
  return "mixed";
}

/** Bare LF to CRLF, leaving existing CRLF alone. */
export function toCrlf(text: string): string {
  return text.replace(/\r?\n/g, "\r\n");
}

export function countLines(text: string): number {
  if (text.length === 0) return 0;
  let count = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) count++;
  return text.endsWith("\n") ? count : count + 1;
}

interface Magic {
  type: string;
  mime: string;
  bytes: number[];
  offset?: number;
}

const MAGIC: Magic[] = [
  { type: "png", mime: "image/png", bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { type: "jpeg", mime: "image/jpeg", bytes: [0xff, 0xd8, 0xff] },
  { type: "gif", mime: "image/gif", bytes: [0x47, 0x49, 0x46, 0x38] },
  { type: "webp", mime: "image/webp", bytes: [0x57, 0x45, 0x42, 0x50], offset: 8 },
  { type: "bmp", mime: "image/bmp", bytes: [0x42, 0x4d] },
  { type: "tiff", mime: "image/tiff", bytes: [0x49, 0x49, 0x2a, 0x00] },
  { type: "tiff", mime: "image/tiff", bytes: [0x4d, 0x4d, 0x00, 0x2a] },
  { type: "ico", mime: "image/x-icon", bytes: [0x00, 0x00, 0x01, 0x00] },
  { type: "pdf", mime: "application/pdf", bytes: [0x25, 0x50, 0x44, 0x46, 0x2d] },
  { type: "zip", mime: "application/zip", bytes: [0x50, 0x4b, 0x03, 0x04] },
  { type: "zip", mime: "application/zip", bytes: [0x50, 0x4b, 0x05, 0x06] },
  { type: "gzip", mime: "application/gzip", bytes: [0x1f, 0x8b] },
  { type: "bzip2", mime: "application/x-bzip2", bytes: [0x42, 0x5a, 0x68] },
  { type: "xz", mime: "application/x-xz", bytes: [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00] },
  { type: "zstd", mime: "application/zstd", bytes: [0x28, 0xb5, 0x2f, 0xfd] },
  { type: "7z", mime: "application/x-7z-compressed", bytes: [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c] },
  { type: "rar", mime: "application/vnd.rar", bytes: [0x52, 0x61, 0x72, 0x21, 0x1a, 0x07] },
  { type: "tar", mime: "application/x-tar", bytes: [0x75, 0x73, 0x74, 0x61, 0x72], offset: 257 },
  { type: "elf", mime: "application/x-executable", bytes: [0x7f, 0x45, 0x4c, 0x46] },
  { type: "pe", mime: "application/vnd.microsoft.portable-executable", bytes: [0x4d, 0x5a] },
  { type: "mach-o", mime: "application/x-mach-binary", bytes: [0xcf, 0xfa, 0xed, 0xfe] },
  { type: "mach-o", mime: "application/x-mach-binary", bytes: [0xfe, 0xed, 0xfa, 0xcf] },
  { type: "wasm", mime: "application/wasm", bytes: [0x00, 0x61, 0x73, 0x6d] },
  { type: "sqlite", mime: "application/vnd.sqlite3", bytes: [0x53, 0x51, 0x4c, 0x69, 0x74, 0x65, 0x20, 0x66] },
  { type: "mp3", mime: "audio/mpeg", bytes: [0x49, 0x44, 0x33] },
  { type: "ogg", mime: "audio/ogg", bytes: [0x4f, 0x67, 0x67, 0x53] },
  { type: "flac", mime: "audio/flac", bytes: [0x66, 0x4c, 0x61, 0x43] },
  { type: "wav", mime: "audio/wav", bytes: [0x57, 0x41, 0x56, 0x45], offset: 8 },
  { type: "mp4", mime: "video/mp4", bytes: [0x66, 0x74, 0x79, 0x70], offset: 4 },
  { type: "class", mime: "application/java-vm", bytes: [0xca, 0xfe, 0xba, 0xbe] },
];

/** A best-effort type from magic bytes; `head` is the start of the file. */
export function guessFileType(head: Buffer): { type: string; mime: string } {
  for (const magic of MAGIC) {
    const offset = magic.offset ?? 0;
    if (head.length < offset + magic.bytes.length) continue;
    if (magic.bytes.every((byte, i) => head[offset + i] === byte)) return { type: magic.type, mime: magic.mime };
  }
  return { type: "binary", mime: "application/octet-stream" };
}
