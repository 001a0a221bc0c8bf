import http, { type IncomingHttpHeaders } from "node:http";
import type { Test } from "tap";

export interface OpenedStream {
  status: number;
  headers: IncomingHttpHeaders;
  /** A refusal's body, parsed when JSON (undefined for a stream that opened). */
  body: any;
  /** Hangs up (a stream that opened); the server sees its connection close. */
  close(): void;
}

/**
 * Long-lived streams over connections of their own (node:http with no agent): each stream holds exactly
 * one connection, and `close` ends that connection, as a browser tab or a device going away does. (fetch
 * keeps a pool that may open a spare connection beside a stream, which would blur connection counts.)
 * Every stream still open is closed at the end of `t`.
 */
export function streamOpener(t: Test, baseURL: string) {
  const open = new Set<http.ClientRequest>();
  t.teardown(() => open.forEach((request) => request.destroy()));
  return (path: string, headers: Record<string, string> = {}): Promise<OpenedStream> =>
    new Promise((resolve, reject) => {
      // Keep-alive asked for, so a `Connection: close` in the answer is the server's own decision.
      const request = http.get(
        new URL(path, baseURL),
        { agent: false, headers: { accept: "text/event-stream", connection: "keep-alive", ...headers } },
        (response) => {
          const status = response.statusCode ?? 0;
          const close = () => {
            open.delete(request);
            request.destroy();
          };
          if (status === 200) {
            open.add(request);
            response.on("error", () => {});
            return resolve({ status, headers: response.headers, body: undefined, close });
          }
          let text = "";
          response.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
          response.on("end", () => {
            request.destroy();
            let body: unknown = text;
            if ((response.headers["content-type"] ?? "").includes("json")) body = JSON.parse(text);
            resolve({ status, headers: response.headers, body, close });
          });
        },
      );
      request.on("error", reject);
    });
}

/** One ordinary request on a connection of its own, closed after: its status and body. */
export function requestOnce(
  url: string,
  init: { method?: string; headers?: Record<string, string>; json?: unknown } = {},
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const body = init.json === undefined ? undefined : JSON.stringify(init.json);
    const headers = { ...(body === undefined ? {} : { "content-type": "application/json" }), ...init.headers };
    const request = http.request(url, { method: init.method ?? "GET", agent: false, headers }, (response) => {
      let text = "";
      response.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text }));
    });
    request.on("error", reject);
    request.end(body);
  });
}
