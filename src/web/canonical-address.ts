import { isIP } from "node:net";
import type { FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { wantsHtml } from "../http/error-handler.js";

export interface CanonicalAddressOptions {
  /** The site's configured address (`BETTER_AUTH_URL`): the one origin its forms, cookies and passkeys work on. */
  baseURL: string;
}

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

/** A host name that can only mean this machine: `localhost`, `*.localhost`, 127.0.0.0/8, `::1`. */
export function isLoopbackHost(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.$/, "");
  if (LOOPBACK_NAMES.has(name) || name.endsWith(".localhost")) return true;
  return isIP(name) === 4 && name.startsWith("127.");
}

/** The host name of a `Host` header value (`127.0.0.1:3000` → `127.0.0.1`, `[::1]:3000` → `[::1]`). */
function hostnameOf(host: string): string {
  try {
    return new URL(`http://${host}`).hostname;
  } catch {
    return host;
  }
}

/**
 * Where a browser asking for a page at another name of this machine should go instead: the configured
 * address with the same path and query, or undefined to serve the request as it is.
 *
 * Only a page request (GET or HEAD that asks for HTML, outside `/api/`) moves, and only when the name it
 * used differs from the configured one and the browser is on this machine (it used a loopback name, or it
 * connects from loopback): `http://127.0.0.1:3000` becomes `http://localhost:3000`, where forms are
 * accepted. A browser on another machine is never sent to a `localhost` that would be its own.
 */
export function canonicalLocation(request: FastifyRequest, base: URL): string | undefined {
  if (request.method !== "GET" && request.method !== "HEAD") return undefined;
  if (!wantsHtml(request)) return undefined;
  const hostname = hostnameOf(request.host).toLowerCase();
  if (hostname === base.hostname.toLowerCase()) return undefined;
  const fromThisMachine = isLoopbackHost(hostname) || isLoopbackHost(stripMapped(request.socket.remoteAddress ?? ""));
  if (!fromThisMachine) return undefined;
  // request.url is origin-form ("/path?query"); a leading "//" stays a path under our origin.
  return base.origin + (request.url.startsWith("/") ? request.url : `/${request.url}`);
}

function stripMapped(address: string): string {
  return address.replace(/^::ffff:/i, "");
}

/**
 * Development only: every address `npm start` prints leads somewhere that works. A page opened at another
 * name of this machine (127.0.0.1 for localhost, or the other way round) is redirected (302) to the
 * configured address before it shows a form, since the origin check refuses forms posted from any other.
 */
export const canonicalAddressPlugin = fp<CanonicalAddressOptions>(
  async (fastify, options) => {
    const base = new URL(options.baseURL);
    fastify.addHook("onRequest", (request, reply, done) => {
      const location = canonicalLocation(request, base);
      if (location === undefined) return done();
      void reply.header("cache-control", "no-store").redirect(location, 302);
    });
  },
  { name: "tether-canonical-address", fastify: "5.x" },
);
