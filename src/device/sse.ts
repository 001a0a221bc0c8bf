/**
 * A Server-Sent Events parser over a response body (Node 20 has no EventSource). It follows the
 * WHATWG rules that matter here: lines end in LF, CRLF or CR; `event:` names the event (default
 * `message`); `data:` lines join with LF; a blank line dispatches; a line starting with `:` is a
 * comment (keep-alive). `onActivity` fires for every chunk, comments included, for idle watchdogs.
 */
export interface SseMessage {
  event: string;
  data: string;
}

/** Where the next line ends in `text` from `start`: the index of its CR or LF, or -1. */
function lineEnd(text: string, start: number): number {
  const lf = text.indexOf("\n", start);
  const cr = text.indexOf("\r", start);
  if (cr === -1) return lf;
  return lf === -1 ? cr : Math.min(lf, cr);
}

/** `body`: chunks as they arrive (a Node stream, or a WHATWG ReadableStream; both iterate). */
export async function* readEventStream(body: AsyncIterable<Uint8Array>, onActivity?: () => void): AsyncGenerator<SseMessage, void, undefined> {
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let sawCR = false;
  for await (const chunk of body) {
    onActivity?.();
    let text = decoder.decode(chunk, { stream: true });
    // A CRLF split across chunks: the LF belongs to the CR already handled.
    if (sawCR && text.startsWith("\n")) text = text.slice(1);
    sawCR = text.endsWith("\r");
    buffer += text;
    let start = 0;
    for (let end = lineEnd(buffer, start); end !== -1; end = lineEnd(buffer, start)) {
      const line = buffer.slice(start, end);
      start = end + (buffer[end] === "\r" && buffer[end + 1] === "\n" ? 2 : 1);
      if (line === "") {
        if (data.length > 0) yield { event: event || "message", data: data.join("\n") };
        event = "";
        data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    buffer = buffer.slice(start);
  }
}
