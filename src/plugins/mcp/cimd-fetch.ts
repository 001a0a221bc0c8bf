import { lookup } from "node:dns/promises";
import { request, type RequestOptions } from "node:https";
import { BlockList, isIP, type LookupFunction } from "node:net";

/**
 * The one outbound fetch Tether makes on a stranger's word: a Client ID Metadata Document, whose URL
 * is whatever `client_id` an OAuth client sends (cimd.ts). It is guarded the way the draft
 * (draft-ietf-oauth-client-id-metadata-document) and the MCP authorization spec ask:
 * - https only; GET with `Accept: application/json`; no redirect is followed (a 3xx is a refusal);
 * - the host is resolved once, and every address it resolves to must be public: loopback, private,
 *   link-local, CGNAT, documentation, multicast, reserved and their IPv6 counterparts (IPv4-mapped, NAT64,
 *   6to4, Teredo, ULA) are refused; the connection is pinned to the checked address, so a second DNS
 *   answer cannot move it (DNS rebinding), while TLS still verifies the certificate for the host name;
 * - a deadline over the whole exchange, and a cap on the body (Content-Length and bytes read alike);
 * - only hosts the operator lists in `allowHosts` skip the address check (a test's loopback server,
 *   or a client on the operator's own network), and `ca` adds trusted roots for those.
 */
export interface MetadataFetchPolicy {
  /** The whole exchange: DNS, connect, TLS, headers and body. */
  timeoutMs: number;
  /** The largest document accepted, in bytes. */
  maxBytes: number;
  /** Host names or address literals allowed to resolve to non-public addresses (lower case). */
  allowHosts: ReadonlySet<string>;
  /** Extra trusted certificate authorities (PEM), for an allowed internal host. */
  ca?: string;
}

/** A document that cannot be used, and why, in words for the client (`invalid_client`). */
export class MetadataFetchError extends Error {}

/** A fetched document: its JSON, and the response's caching headers. */
export interface FetchedDocument {
  document: unknown;
  cacheControl: string | undefined;
  expires: string | undefined;
  date: string | undefined;
  age: string | undefined;
}

const NON_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const)
  NON_PUBLIC.addSubnet(network, prefix, "ipv4");
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["64:ff9b::", 96],
  ["64:ff9b:1::", 48],
  ["100::", 64],
  ["2001::", 23],
  ["2001:db8::", 32],
  ["2002::", 16],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const)
  NON_PUBLIC.addSubnet(network, prefix, "ipv6");

/** Whether an address literal is on the public internet (RFC 6890's special-purpose ranges are not). */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 4) return !NON_PUBLIC.check(address, "ipv4");
  // IPv4-mapped IPv6 (::ffff:a.b.c.d) is refused whole: no public name needs it, and as a BlockList rule
  // (::ffff:0:0/96) it would match every IPv4 address too.
  if (new URL(`http://[${address}]`).hostname.startsWith("[::ffff:")) return false;
  return !NON_PUBLIC.check(address, "ipv6");
}

/** The address to connect to: the host's, checked, unless the operator allowed the host. */
async function checkedAddress(hostname: string, policy: MetadataFetchPolicy): Promise<{ address: string; family: number }> {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const allowed = policy.allowHosts.has(host);
  const family = isIP(host);
  if (family !== 0) {
    if (!allowed && !isPublicAddress(host)) throw new MetadataFetchError("client_id URL must not point to a private, loopback or reserved address");
    return { address: host, family };
  }
  if (!allowed && (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".internal")))
    throw new MetadataFetchError("client_id URL must not point to a private, loopback or reserved address");
  let answers: Array<{ address: string; family: number }>;
  try {
    answers = await lookup(host, { all: true, verbatim: true });
  } catch {
    throw new MetadataFetchError("client_id URL's host does not resolve");
  }
  if (answers.length === 0) throw new MetadataFetchError("client_id URL's host does not resolve");
  if (!allowed && answers.some((answer) => !isPublicAddress(answer.address)))
    throw new MetadataFetchError("client_id URL's host resolves to a private, loopback or reserved address");
  return answers[0]!;
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** Fetches and parses the document at `url` under `policy`; every failure is a MetadataFetchError. */
export async function fetchMetadataDocument(url: URL, policy: MetadataFetchPolicy): Promise<FetchedDocument> {
  if (url.protocol !== "https:") throw new MetadataFetchError("client_id URL must use https");
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), policy.timeoutMs);
  try {
    const pinned = await checkedAddress(url.hostname, policy);
    if (controller.signal.aborted) throw new MetadataFetchError(`metadata document fetch timed out after ${policy.timeoutMs} ms`);
    return await get(url, pinned, policy, controller.signal);
  } catch (error) {
    if (controller.signal.aborted) throw new MetadataFetchError(`metadata document fetch timed out after ${policy.timeoutMs} ms`);
    if (error instanceof MetadataFetchError) throw error;
    throw new MetadataFetchError("metadata document could not be fetched");
  } finally {
    clearTimeout(timer);
  }
}

function get(url: URL, pinned: { address: string; family: number }, policy: MetadataFetchPolicy, signal: AbortSignal): Promise<FetchedDocument> {
  // Every connection goes to the address checked above, whatever DNS says now.
  const pin: LookupFunction = (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as (error: null, addresses: Array<{ address: string; family: number }>) => void)(null, [pinned]);
    else callback(null, pinned.address, pinned.family);
  };
  const options: RequestOptions = {
    method: "GET",
    headers: { accept: "application/json" },
    agent: false,
    lookup: pin,
    signal,
    ...(isIP(url.hostname.replace(/^\[|\]$/g, "")) === 0 ? { servername: url.hostname } : {}),
    ...(policy.ca ? { ca: policy.ca } : {}),
  };
  return new Promise<FetchedDocument>((resolve, reject) => {
    const outgoing = request(url, options, (response) => {
      const fail = (message: string) => {
        response.destroy();
        reject(new MetadataFetchError(message));
      };
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400) return fail(`metadata document fetch answered a redirect (HTTP ${status}); redirects are not followed`);
      if (status !== 200) return fail(`metadata document fetch answered HTTP ${status}`);
      const type = response.headers["content-type"] ?? "";
      if (!JSON_TYPE.test(type)) return fail(`metadata document must be JSON (Content-Type was "${type}")`);
      const declared = Number(response.headers["content-length"]);
      if (Number.isFinite(declared) && declared > policy.maxBytes) return fail(`metadata document is larger than ${policy.maxBytes} bytes`);
      const chunks: Buffer[] = [];
      let size = 0;
      response.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > policy.maxBytes) return fail(`metadata document is larger than ${policy.maxBytes} bytes`);
        chunks.push(chunk);
      });
      response.on("error", () => reject(new MetadataFetchError("metadata document could not be read")));
      response.on("end", () => {
        let document: unknown;
        try {
          document = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          return reject(new MetadataFetchError("metadata document is not valid JSON"));
        }
        const header = (name: string) => {
          const value = response.headers[name];
          return Array.isArray(value) ? value.join(", ") : value;
        };
        resolve({ document, cacheControl: header("cache-control"), expires: header("expires"), date: header("date"), age: header("age") });
      });
    });
    outgoing.on("error", reject);
    outgoing.end();
  });
}

/**
 * How long a fetched document stays fresh, by HTTP caching (RFC 9111): `no-store`, `no-cache` and
 * `private` keep nothing; `s-maxage`/`max-age` less `Age`, else `Expires` less `Date`; bounded by
 * `maxMs` (and, with no freshness given, `maxMs` too, the draft letting the server choose).
 */
export function freshnessMs(fetched: Pick<FetchedDocument, "cacheControl" | "expires" | "date" | "age">, maxMs: number): number {
  const directives = new Map<string, string>();
  for (const part of (fetched.cacheControl ?? "").split(",")) {
    const [name, value] = part.trim().split("=", 2);
    if (name) directives.set(name.toLowerCase(), (value ?? "").replace(/^"|"$/g, ""));
  }
  if (directives.has("no-store") || directives.has("no-cache") || directives.has("private")) return 0;
  const age = /^\d+$/.test(fetched.age ?? "") ? Number(fetched.age) * 1000 : 0;
  const maxAge = directives.get("s-maxage") ?? directives.get("max-age");
  if (maxAge !== undefined) return /^\d+$/.test(maxAge) ? Math.min(maxMs, Math.max(0, Number(maxAge) * 1000 - age)) : 0;
  if (fetched.expires !== undefined) {
    const expires = Date.parse(fetched.expires);
    const date = fetched.date ? Date.parse(fetched.date) : Date.now();
    return Number.isFinite(expires) && Number.isFinite(date) ? Math.min(maxMs, Math.max(0, expires - date - age)) : 0;
  }
  return maxMs;
}
