import { MAX_RESULT_BATCH_BYTES, MAX_RESULT_BATCH_ITEMS, type ResultBody } from "../protocol/index.js";
import { ServerError, type HostClient } from "./client.js";
import { sleep } from "./sleep.js";

/** A result larger than this is always posted alone; smaller ones may share a request. */
const BATCHABLE_BYTES = 16 * 1024;
/** The `{"results":[` … `]}` around a batch's items. */
const BATCH_FRAME_BYTES = 16;
/** Attempts per post: a result that cannot be delivered after these is dropped (the caller times out). */
const ATTEMPTS = 3;

interface Pending {
  body: ResultBody;
  json: string;
  bytes: number;
  delivered: () => void;
}

/**
 * Posts the device's results. A result ready alone goes to `POST /api/host/result/<id>`; results that
 * are ready in the same turn of the event loop (many calls in flight: the server's call events arrive
 * in one chunk and small tools finish together) share one `POST /api/host/results`, so a busy device
 * makes one request for several calls. Each post is retried on network errors and 5xx; a 4xx means
 * the server will not take it (settled already, or given up), and retrying cannot help.
 */
export class ResultOutbox {
  private pending: Pending[] = [];
  private flushScheduled = false;

  constructor(
    private readonly client: HostClient,
    private readonly stop: AbortSignal,
  ) {}

  /** Resolves once the result was taken, refused, or given up on. */
  post(body: ResultBody): Promise<void> {
    const json = JSON.stringify(body);
    const bytes = Buffer.byteLength(json);
    if (bytes > BATCHABLE_BYTES) return this.withRetries(() => this.client.result(body));
    return new Promise((delivered) => {
      this.pending.push({ body, json, bytes, delivered });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const pending = this.pending;
    this.pending = [];
    for (let start = 0; start < pending.length;) {
      let end = start + 1;
      let bytes = BATCH_FRAME_BYTES + pending[start]!.bytes;
      while (end < pending.length && end - start < MAX_RESULT_BATCH_ITEMS && bytes + 1 + pending[end]!.bytes <= MAX_RESULT_BATCH_BYTES) {
        bytes += 1 + pending[end]!.bytes;
        end++;
      }
      const batch = pending.slice(start, end);
      const send = batch.length === 1 ? () => this.client.result(batch[0]!.body) : () => this.postBatch(batch);
      void this.withRetries(send).finally(() => {
        for (const item of batch) item.delivered();
      });
      start = end;
    }
  }

  /**
   * A batch the server refuses as a whole (one result in it has a NUL byte, say) is posted again one
   * result at a time: the bad one is refused alone, which ends its own call at once, and the others
   * are taken. A refused credential is not retried.
   */
  private async postBatch(batch: readonly Pending[]): Promise<void> {
    try {
      await this.client.results(batch.map((item) => item.json));
    } catch (error) {
      if (!(error instanceof ServerError && error.permanent) || error.credentialRejected) throw error;
      await Promise.all(batch.map((item) => this.withRetries(() => this.client.result(item.body))));
    }
  }

  private async withRetries(send: () => Promise<unknown>): Promise<void> {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        await send();
        return;
      } catch (error) {
        if (error instanceof ServerError && error.permanent) return;
        if (this.stop.aborted || !(await sleep(200 * (attempt + 1), this.stop))) return;
      }
    }
  }
}
