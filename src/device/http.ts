import { readFileSync } from "node:fs";
import type { Readable } from "node:stream";
import tls from "node:tls";
import { EnvHttpProxyAgent, request, type Dispatcher } from "undici";
import { HostConfigError } from "./config.js";

/** A response as the device reads it: the status, and the body once (as text, or chunk by chunk). */
export interface DeviceResponse {
  readonly status: number;
  readonly ok: boolean;
  /** The body as chunks (the event stream); reading it is the caller's job. */
  readonly body: AsyncIterable<Uint8Array>;
  text(): Promise<string>;
}

export interface DeviceRequestInit {
  method?: "GET" | "POST" | "PUT";
  headers: Record<string, string>;
  /**
   * A string, a stream, or an async iterable of chunks (a blob's bytes, never held whole in memory; an iterable is
   * written chunk by chunk as the socket takes them: `file-chunks.ts` relies on that).
   */
  body?: string | Readable | AsyncIterable<Uint8Array>;
  signal?: AbortSignal;
}

/** How the device makes every request to the server, the event stream included. */
export type DeviceRequest = (url: string, init: DeviceRequestInit) => Promise<DeviceResponse>;

type Env = Record<string, string | undefined>;

/**
 * The device's network settings, from the environment, as corporate machines expect:
 *
 * - `HTTPS_PROXY`, `HTTP_PROXY` (or lower case) and `NO_PROXY`: undici's `EnvHttpProxyAgent`, the
 *   same rules curl and most tools follow (HTTPS through CONNECT). Node 20's global fetch ignores
 *   these variables, so the device bundles undici and uses its fetch with that dispatcher.
 * - `TETHER_CA_FILE`: PEM certificates trusted on top of the system's, for the server and the proxy
 *   (a TLS-inspecting proxy, a private CA). `NODE_EXTRA_CA_CERTS` is honoured too (Node reads it at
 *   start-up; it is added again here because an explicit `ca` list would replace Node's store).
 */
export function networkDispatcher(env: Env = process.env): Dispatcher {
  // An http:// server is reached with plain proxy requests (absolute URLs), as curl does: many proxies
  // allow CONNECT to port 443 only. An https:// server is always tunnelled (CONNECT).
  const proxying = {
    proxyTunnel: false,
    // From `env` (not undici's own look at process.env), lower case first as curl reads them.
    httpProxy: env.http_proxy || env.HTTP_PROXY || "",
    httpsProxy: env.https_proxy || env.HTTPS_PROXY || "",
    noProxy: env.no_proxy || env.NO_PROXY || "",
  };
  const extra = [env.NODE_EXTRA_CA_CERTS, env.TETHER_CA_FILE].map((file) => file?.trim()).filter((file): file is string => !!file);
  if (extra.length === 0) return new EnvHttpProxyAgent(proxying);
  const ca = [...tls.rootCertificates];
  for (const file of extra) {
    try {
      ca.push(readFileSync(file, "utf8"));
    } catch (error) {
      const name = file === env.TETHER_CA_FILE?.trim() ? "TETHER_CA_FILE" : "NODE_EXTRA_CA_CERTS";
      throw new HostConfigError(`${name}=${file} cannot be read: ${(error as Error).message}`);
    }
  }
  return new EnvHttpProxyAgent({ ...proxying, connect: { ca }, requestTls: { ca }, proxyTls: { ca } });
}

/**
 * Requests through `dispatcher` (default: `networkDispatcher()` from the environment), with undici's
 * `request`: a result post is on the hot path of every tool call, and `request` costs a fraction of
 * `fetch` (no WHATWG Request/Response/stream objects; measured with `npm run bench -- host`).
 */
export function deviceRequest(dispatcher: Dispatcher = networkDispatcher()): DeviceRequest {
  return async (url, init) => {
    const response = await request(url, {
      dispatcher,
      method: init.method ?? "GET",
      headers: init.headers,
      // undici takes async iterables (its types leave them out).
      ...(init.body !== undefined ? { body: init.body as string | Readable } : {}),
      ...(init.signal ? { signal: init.signal } : {}),
    });
    const body = response.body;
    return { status: response.statusCode, ok: response.statusCode >= 200 && response.statusCode < 300, body, text: () => body.text() };
  };
}

/** What the device says about the network set-up in its first lines (never the proxy's credentials). */
export function describeNetwork(env: Env = process.env): string | undefined {
  const proxy = env.HTTPS_PROXY || env.https_proxy || env.HTTP_PROXY || env.http_proxy;
  if (!proxy) return undefined;
  let shown = proxy;
  try {
    const url = new URL(proxy);
    shown = `${url.protocol}//${url.host}`;
  } catch {
    /* shown as given */
  }
  const noProxy = env.NO_PROXY || env.no_proxy;
  return `using proxy ${shown}${noProxy ? ` (except ${noProxy})` : ""}`;
}
