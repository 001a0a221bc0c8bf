import { readFileSync } from "node:fs";
import tls from "node:tls";
import { EnvHttpProxyAgent, fetch as undiciFetch, type Dispatcher } from "undici";
import { HostConfigError } from "./config.js";

/** `fetch` as the device uses it for every request to the server, the event stream included. */
export type DeviceFetch = (url: string, init?: RequestInit) => Promise<Response>;

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

/** A fetch through `dispatcher` (default: `networkDispatcher()` from the environment). */
export function deviceFetch(dispatcher: Dispatcher = networkDispatcher()): DeviceFetch {
  // undici's Response is the standard one at run time; its TypeScript types are its own.
  return (url, init) => undiciFetch(url, { ...(init as object), dispatcher }) as unknown as Promise<Response>;
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
