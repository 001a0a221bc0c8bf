import { PassThrough, Transform, type Readable } from "node:stream";
import { BlobError } from "./store.js";

/**
 * The first download of a device blob, streamed while the device is still uploading it (docs/blobs.md).
 *
 * A GET that finds the blob incomplete `wait`s on it; when the device's upload reaches this replica
 * (`BlobService.receive`), the waiting downloads are handed a stream each and the upload is teed to them
 * (`Tee`) on its way into the store. A download gets the bytes as they arrive, at the pace of the slowest
 * reader (backpressure reaches the device), but never the last chunk before the store has checked the size
 * and sha256 and the blob is marked complete: a download answered with the blob's `Content-Length` can only
 * ever end whole and verified. An upload that turns out wrong (mismatch, device gone) destroys the streams, so
 * the responses are aborted, never ended cleanly. A download that arrives once the upload is under way waits
 * for it to complete, as before; so do ranges.
 */
export function liveUploads() {
  const waiting = new Map<string, Set<(stream: Readable) => void>>();

  /** Resolves with a stream of the blob's bytes when its upload starts here; `cancel` when the wait ends otherwise. */
  function wait(id: string): { stream: Promise<Readable>; cancel(): void } {
    let take!: (stream: Readable) => void;
    const stream = new Promise<Readable>((resolve) => (take = resolve));
    const set = waiting.get(id) ?? new Set();
    set.add(take);
    waiting.set(id, set);
    const cancel = () => {
      set.delete(take);
      if (set.size === 0 && waiting.get(id) === set) waiting.delete(id);
    };
    return { stream, cancel };
  }

  /** The tee for an upload that starts now, or undefined when nobody waits (nothing extra to do). */
  function start(id: string, size: number): Tee | undefined {
    const takers = waiting.get(id);
    if (!takers || takers.size === 0) return undefined;
    waiting.delete(id);
    const tee = new Tee(size);
    for (const take of takers) take(tee.follow());
    return tee;
  }

  return { wait, start };
}

export type LiveUploads = ReturnType<typeof liveUploads>;

/**
 * Passes an upload through unchanged while copying it to its followers, one chunk behind: the last chunk is
 * held back until `release` (the blob verified and complete); `abort` destroys the followers instead.
 */
export class Tee extends Transform {
  private readonly followers = new Set<PassThrough>();
  private held: Buffer | undefined;
  private bytes = 0;

  constructor(private readonly size: number) {
    super({ highWaterMark: 1024 * 1024 });
  }

  follow(): Readable {
    const follower = new PassThrough({ highWaterMark: 1024 * 1024 });
    // A reader that hangs up stops receiving; the upload goes on into the store.
    follower.once("close", () => this.followers.delete(follower));
    this.followers.add(follower);
    return follower;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null, data?: Buffer) => void): void {
    this.bytes += chunk.length;
    if (this.bytes > this.size) {
      callback(new BlobError("BLOB_SIZE_MISMATCH", `The body is longer than the announced ${this.size} bytes; nothing was kept`));
      return;
    }
    const previous = this.held;
    this.held = chunk;
    if (!previous) return callback(null, chunk);
    void this.forward(previous).then(() => callback(null, chunk));
  }

  /** Writes to every follower, and waits for those that are full to drain (or go away). */
  private async forward(chunk: Buffer): Promise<void> {
    const full: Promise<void>[] = [];
    for (const follower of this.followers) {
      if (follower.destroyed) continue;
      if (!follower.write(chunk)) {
        full.push(
          new Promise<void>((resolve) => {
            const done = () => {
              follower.off("drain", done).off("close", done);
              resolve();
            };
            follower.on("drain", done).on("close", done);
          }),
        );
      }
    }
    await Promise.all(full);
  }

  /** The upload is verified and the blob complete: the last chunk, and the end. */
  release(): void {
    for (const follower of this.followers) {
      if (this.held) follower.write(this.held);
      follower.end();
    }
    this.held = undefined;
  }

  /** The upload failed: every follower's stream errors, so its response is cut off. */
  abort(error: Error): void {
    for (const follower of this.followers) follower.destroy(error);
    this.held = undefined;
  }
}
