import fs from "node:fs";
import { Writable } from "node:stream";

/**
 * A file sink that keeps up to `inFlight` writes going at once, each at its own offset, instead of
 * `fs.createWriteStream`'s one at a time. Measured on the first fetch of a device blob (`npm run bench -- blobs`),
 * the store's write was the stage every other one waited on: each write's trip through libuv's thread pool and
 * back to a busy event loop left the upload, the download and the disk idle in turn. With a few writes queued
 * the disk is never the one waiting. Memory stays bounded: at most `inFlight` chunks are held by the writes, plus
 * the stream's own `highWaterMark`.
 *
 * The file is created with `flags` (default `wx`: never an existing file) and `mode`, closed at the end or on
 * error (`destroy`); the caller removes it when the stream failed.
 */
export class ParallelFileWriter extends Writable {
  private fd: number | undefined;
  private position = 0;
  private running = 0;
  private failure: Error | undefined;
  /** A write callback withheld while `inFlight` writes are running, released when one ends. */
  private waiting: (() => void) | undefined;
  private idle: (() => void) | undefined;

  constructor(
    private readonly file: string,
    private readonly options: { mode?: number; flags?: string; inFlight?: number; highWaterMark?: number } = {},
  ) {
    super({ highWaterMark: options.highWaterMark ?? 1024 * 1024 });
  }

  override _construct(callback: (error?: Error | null) => void): void {
    fs.open(this.file, this.options.flags ?? "wx", this.options.mode ?? 0o600, (error, fd) => {
      this.fd = fd;
      callback(error);
    });
  }

  override _writev(chunks: { chunk: Buffer }[], callback: (error?: Error | null) => void): void {
    if (this.failure) return callback(this.failure);
    const buffers = chunks.map((entry) => entry.chunk);
    const at = this.position;
    for (const buffer of buffers) this.position += buffer.length;
    this.running++;
    this.writeAll(buffers, at, (error) => {
      this.running--;
      if (error) this.failure ??= error;
      const next = this.waiting;
      this.waiting = undefined;
      next?.();
      if (this.running === 0) this.idle?.();
    });
    // Room for another write: ask for the next chunks now, while this one is on its way to the disk.
    if (this.running < (this.options.inFlight ?? 4)) callback();
    else this.waiting = () => callback(this.failure);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this._writev([{ chunk }], callback);
  }

  /** `fs.writev` may write less than asked (a full disk writes part, then fails): the rest is written after it. */
  private writeAll(buffers: Buffer[], at: number, done: (error: Error | null) => void): void {
    fs.writev(this.fd!, buffers, at, (error, written) => {
      if (error) return done(error);
      let skip = written;
      const rest: Buffer[] = [];
      for (const buffer of buffers) {
        if (skip >= buffer.length) skip -= buffer.length;
        else {
          rest.push(skip > 0 ? buffer.subarray(skip) : buffer);
          skip = 0;
        }
      }
      if (rest.length === 0) return done(null);
      this.writeAll(rest, at + written, done);
    });
  }

  override _final(callback: (error?: Error | null) => void): void {
    const finish = () => {
      this.idle = undefined;
      callback(this.failure);
    };
    if (this.running === 0) finish();
    else this.idle = finish;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const close = () => {
      if (this.fd === undefined) return callback(error);
      const fd = this.fd;
      this.fd = undefined;
      fs.close(fd, (closeError) => callback(error ?? closeError));
    };
    // The writes still running hold the descriptor: close it once they are done.
    if (this.running === 0) close();
    else this.idle = close;
  }
}
