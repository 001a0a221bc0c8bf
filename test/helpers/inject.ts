/**
 * `fetch` without a socket: requests go through Fastify's `app.inject` (light-my-request), as the official
 * @fastify/* plugins are tested, and come back as real WHATWG `Response`s, so a test (and `TestClient`) reads
 * them exactly as it reads a response that crossed loopback.
 *
 * Why: a test that only asks and reads answers gains nothing from a socket but its cost (a port, connection
 * set-up, keep-alive sockets a teardown must wait for or cut). Tests that need one (streams, connection
 * behaviour, a client someone else wrote) still listen; see docs/development.md, "How tests reach the app".
 *
 * What it keeps of real fetch, so assertions stay the same: absolute URLs (the Host header is the URL's, so
 * better-auth's baseURL and origin checks see `http://localhost:<port>` as before), the default request headers
 * undici sends, the body as fetch encodes it (strings, JSON, URLSearchParams, bytes), every response header
 * (each `Set-Cookie` apart, for `getSetCookie()`), the body bytes, and `redirect` "follow" / "manual" / "error".
 */
import { promisify } from "node:util";
import { gunzip, inflate } from "node:zlib";
import type { FastifyInstance } from "fastify";

/** What undici's fetch sends unless the caller sets it (measured on Node 20 against a node:http server). */
const FETCH_DEFAULT_HEADERS: Record<string, string> = {
  connection: "keep-alive",
  accept: "*/*",
  "accept-language": "*",
  "sec-fetch-mode": "cors",
  "user-agent": "node",
  "accept-encoding": "gzip, deflate",
};
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const MAX_REDIRECTS = 20;
const decoders: Record<string, (bytes: Buffer) => Promise<Buffer>> = { gzip: promisify(gunzip), deflate: promisify(inflate) };

/** A fetch-compatible function that answers absolute URLs on `app`'s own origin through `app.inject`. */
export function injectFetch(app: FastifyInstance): typeof fetch {
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const first = new Request(input, init);
    first.signal.throwIfAborted();
    let method = first.method;
    let body: Buffer | undefined = first.body ? Buffer.from(await first.arrayBuffer()) : undefined;
    const headers = new Headers(first.headers);
    let url = new URL(first.url);
    for (let hops = 0; ; hops++) {
      const response = await injectOnce(app, method, url, headers, body);
      if (!REDIRECTS.has(response.status) || first.redirect === "manual" || !response.headers.has("location")) {
        return withURL(response, url, hops > 0);
      }
      if (first.redirect === "error") throw new TypeError("fetch failed", { cause: new Error("redirect mode is set to error") });
      if (hops === MAX_REDIRECTS) throw new TypeError("fetch failed", { cause: new Error("redirect count exceeded") });
      const next = new URL(response.headers.get("location")!, url);
      if (next.origin !== url.origin) throw new Error(`injectFetch: a redirect to ${next.origin} leaves the app (${url.origin}); listen for this test`);
      // As fetch does: 303 (and 301/302 after a POST) turn into a GET without a body.
      if ((response.status === 303 && method !== "HEAD") || ((response.status === 301 || response.status === 302) && method === "POST")) {
        method = "GET";
        body = undefined;
        for (const name of ["content-type", "content-length", "content-encoding", "content-language", "content-location"]) headers.delete(name);
      }
      url = next;
    }
  };
}

async function injectOnce(app: FastifyInstance, method: string, url: URL, headers: Headers, body: Buffer | undefined): Promise<Response> {
  // undici closes the connection after a HEAD (it cannot tell where a HEAD response ends on a kept one).
  const sent: Record<string, string> = { ...FETCH_DEFAULT_HEADERS, ...(method === "HEAD" ? { connection: "close" } : {}) };
  headers.forEach((value, name) => (sent[name] = value));
  const injected = await app.inject({ method: method as "GET", url: url.href, headers: sent, ...(body ? { payload: body } : {}) });
  const received = new Headers();
  for (const [name, value] of Object.entries(injected.headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) received.append(name, String(one));
  }
  let bytes: Buffer | null = NULL_BODY.has(injected.statusCode) || method === "HEAD" ? null : injected.rawPayload;
  const encoding = received.get("content-encoding")?.toLowerCase();
  if (bytes && encoding && decoders[encoding]) bytes = await decoders[encoding](bytes);
  // A Buffer is a Uint8Array, which Response takes; only the DOM typings' ArrayBuffer variance objects.
  return new Response(bytes as unknown as Uint8Array<ArrayBuffer> | null, {
    status: injected.statusCode,
    statusText: injected.statusMessage,
    headers: received,
  });
}

/** `url` and `redirected` as fetch sets them (a constructed Response has neither). */
function withURL(response: Response, url: URL, redirected: boolean): Response {
  Object.defineProperty(response, "url", { value: url.href });
  Object.defineProperty(response, "redirected", { value: redirected });
  return response;
}

const served = new Map<string, typeof fetch>();

/**
 * Serves `origin` (`http://localhost:<port>`) through `app.inject` for `testFetch`, `TestClient` and the helpers
 * built on them, until the returned function is called (when the test closes the app, or once it listens).
 */
export function serveThroughInject(origin: string, app: FastifyInstance): () => void {
  const key = new URL(origin).origin;
  if (served.has(key)) throw new Error(`${key} is already served through inject`);
  const transport = injectFetch(app);
  served.set(key, transport);
  return () => {
    if (served.get(key) === transport) served.delete(key);
  };
}

/** Whether `origin` is already served through inject (a port no app holds can be handed out again). */
export function servedThroughInject(origin: string): boolean {
  return served.has(new URL(origin).origin);
}

/**
 * `fetch` for tests: a URL on an origin served through inject goes to that app without a socket; any other URL
 * (an app that listens, a third party) goes over the network as before.
 */
export const testFetch: typeof fetch = (input, init) => {
  const href = input instanceof Request ? input.url : String(input);
  const transport = URL.canParse(href) ? served.get(new URL(href).origin) : undefined;
  return (transport ?? fetch)(input, init);
};
