import type { ServerResponse } from "node:http";
import type { DeviceChannel } from "./dispatcher.js";
import { StreamEvent, type CloseReason } from "../../protocol/index.js";

/** An event stream that has fallen this far behind is a dead or hostile reader: it is cut off. */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

export interface SseStream extends DeviceChannel {
  /** Resolves when the stream has ended, whoever ended it. */
  readonly ended: Promise<void>;
  /** Ends the stream without a `close` event (streams that do not speak the host protocol). */
  end(): void;
}

/**
 * Server-Sent Events over a raw Node response (the route has hijacked the reply): writes the head,
 * a keep-alive comment every `keepAliveMs`, one `event:`/`data:` frame per event (data is one line
 * of JSON, so it never needs splitting), and ends with a `close` event when the server ends it.
 */
export function openSseStream(raw: ServerResponse, keepAliveMs: number, extraHeaders: Record<string, string> = {}): SseStream {
  raw.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    // Reverse proxies (nginx) must not buffer the stream.
    "x-accel-buffering": "no",
    ...extraHeaders,
  });
  raw.flushHeaders();
  // A stream is long-lived by design: the server's idle-socket timeout must not cut it (a dead reader
  // is found by the keep-alive writes failing, or by the buffer bound below).
  raw.setTimeout(0);
  let open = true;
  let resolveEnded!: () => void;
  const ended = new Promise<void>((resolve) => (resolveEnded = resolve));

  // Frames written in one turn of the event loop leave in one write: with many calls in flight, a
  // device's calls arrive in one chunk (one syscall each side instead of one per call).
  let pending = "";
  let flushScheduled = false;
  const flush = () => {
    flushScheduled = false;
    if (!open || pending === "") return;
    raw.write(pending);
    pending = "";
    if (raw.writableLength > MAX_BUFFERED_BYTES) raw.destroy();
  };
  const write = (chunk: string) => {
    if (!open) return;
    pending += chunk;
    if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flush);
    }
  };
  /** Writes what is pending now; the stream then ends (`raw.end()`) after it. */
  const flushNow = () => {
    flush();
    open = false;
    clearInterval(keepAlive);
  };
  const keepAlive = setInterval(() => write(": keep-alive\n\n"), keepAliveMs);
  keepAlive.unref();

  const end = () => {
    open = false;
    clearInterval(keepAlive);
    resolveEnded();
  };
  raw.on("close", end);
  // The client may have gone while the request was being authenticated.
  if (raw.socket === null || raw.socket.destroyed) end();

  return {
    ended,
    end() {
      if (!open) return;
      flushNow();
      raw.end();
    },
    send(event, data) {
      write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    },
    close(reason: CloseReason, message: string) {
      if (!open) return;
      write(`event: ${StreamEvent.close}\ndata: ${JSON.stringify({ reason, message })}\n\n`);
      flushNow();
      raw.end();
    },
  };
}
