/**
 * A Server-Sent Events parser over a fetch body (Node 20 has no EventSource). It follows the
 * WHATWG rules that matter here: lines end in LF, CRLF or CR; `event:` names the event (default
 * `message`); `data:` lines join with LF; a blank line dispatches; a line starting with `:` is a
 * comment (keep-alive). `onActivity` fires for every chunk, comments included, for idle watchdogs.
 */
export interface SseMessage {
  event: string;
  data: string;
}

export async function* readEventStream(
  body: ReadableStream<Uint8Array>,
  onActivity?: () => void,
): AsyncGenerator<SseMessage, void, undefined> {
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let sawCR = false;
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      onActivity?.();
      let text = decoder.decode(value, { stream: true });
      // A CRLF split across chunks: the LF belongs to the CR already handled.
      if (sawCR && text.startsWith("\n")) text = text.slice(1);
      sawCR = text.endsWith("\r");
      buffer += text;
      let start = 0;
      for (;;) {
        const match = /\r\n|\r|\n/.exec(buffer.slice(start));
        if (!match) break;
        const line = buffer.slice(start, start + match.index);
        start += match.index + match[0].length;
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
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}
