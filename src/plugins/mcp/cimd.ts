import {
  extendOAuthProvider,
  oauthClientMetadataSchema,
  type ClientDiscovery,
  type OAuthClient,
  type OAuthOptions,
  type Scope,
} from "@better-auth/oauth-provider";
import { isForbiddenCimdClientMetadataField, registerClientMetadataDocument } from "@better-auth/oauth-provider/internal";
import type { BetterAuthPlugin } from "better-auth";
import { APIError, createAuthMiddleware } from "better-auth/api";
import { fetchMetadataDocument, freshnessMs, MetadataFetchError, type MetadataFetchPolicy } from "./cimd-fetch.js";

/**
 * Client ID Metadata Documents (MCP authorization, draft-ietf-oauth-client-id-metadata-document): a
 * client whose `client_id` is an https URL is the document at that URL. A companion plugin of
 * better-auth's OAuth provider, through its extension point (`extendOAuthProvider`, `clientDiscovery`):
 * the provider asks us for a client it does not know, or for one we made; we fetch the document
 * (cimd-fetch.ts: https only, no redirects, a deadline, a size cap, public addresses only), check it
 * (its `client_id` is the URL, it lists its `redirect_uris`, it is a public client), and have the
 * provider store it (its own `registerClientMetadataDocument`, which links the /mcp resource as for a
 * registered client). The provider then checks `redirect_uri`, PKCE and the rest as for any client.
 *
 * Documents are cached in this process by HTTP caching, bounded (`maxCacheMs`, `maxCacheEntries`): a
 * client known and fresh costs no fetch, which matters because the provider asks on every token
 * validation. A stale document that cannot be fetched again leaves a known client as it was (retried
 * after a minute): a client's web site being down does not cut its owners off; the owner revokes a
 * client on /settings/mcp. Dynamic registration (RFC 7591) stays for clients that use it.
 */
export interface CimdOptions {
  /** Hosts allowed to resolve to loopback or private addresses (tests, an operator's own network). Default none. */
  allowHosts?: string[];
  /** Extra trusted roots (PEM) for fetching documents, with `allowHosts`. */
  ca?: string;
  /** Deadline of one document fetch. Default 5 s. */
  timeoutMs?: number;
  /** Largest document accepted. Default 5 KiB. */
  maxBytes?: number;
  /** Longest a document is trusted without fetching it again, whatever its caching headers say. Default 1 h. */
  maxCacheMs?: number;
  /** Documents kept (least recently used go first). Default 1000. */
  maxCacheEntries?: number;
  /** Document fetches under way at once in this process; past it, 429 `temporarily_unavailable`. Default 8. */
  maxConcurrentFetches?: number;
}

export const CIMD_DISCOVERY_ID = "tether-cimd";
export const CIMD_PLUGIN_ID = "tether-cimd";
/** A known client whose document could not be fetched again is tried again after this long. */
const RETRY_AFTER_FAILURE_MS = 60_000;

/** An APIError's `error_description`, else the error's message. */
const describe = (error: unknown) => (error as { body?: { error_description?: string } }).body?.error_description ?? String(error);

const invalidClient = (description: string) => new APIError("BAD_REQUEST", { error: "invalid_client", error_description: description });

/** The draft's rules for the URL itself (§3): https, a path, no fragment, no credentials, no dot segments. */
export function clientIdURLProblem(clientId: string): string | undefined {
  if (!/^https:\/\/[^/?#\\]+\/[^\\]*$/i.test(clientId)) return "client_id must be an https URL with a path";
  if (clientId.includes("#")) return "client_id URL must not contain a fragment";
  if (/\/(?:\.|%2e){1,2}(?:[/?]|$)/i.test(clientId)) return "client_id URL must not contain dot segments";
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    return "client_id is not a valid URL";
  }
  if (url.username || url.password) return "client_id URL must not contain credentials";
  return undefined;
}

/** The document's own rules: it names itself, lists where it may be sent back, and has no secret. */
export function checkDocument(clientId: string, raw: unknown): OAuthClient {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw invalidClient("metadata document is not a JSON object");
  for (const field of Object.keys(raw)) if (isForbiddenCimdClientMetadataField(field)) throw invalidClient(`metadata document must not contain "${field}"`);
  const parsed = oauthClientMetadataSchema.strip().safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw invalidClient(`metadata document: ${issue?.path.join(".") || "document"}: ${issue?.message ?? "invalid"}`);
  }
  const document = parsed.data;
  if (document.client_id !== clientId) throw invalidClient("metadata document's client_id is not the URL it was fetched from");
  if (!document.client_name?.trim()) throw invalidClient("metadata document must have a client_name");
  if (!document.redirect_uris?.length) throw invalidClient("metadata document must list its redirect_uris");
  const method = document.token_endpoint_auth_method ?? "none";
  // Tether keeps no client keys: a document client is a public client, with PKCE.
  if (method !== "none") throw invalidClient(`metadata document's token_endpoint_auth_method must be "none" (was "${method}")`);
  return { ...document, token_endpoint_auth_method: "none", redirect_uris: document.redirect_uris };
}

interface CacheEntry {
  /** None for a known client whose document could not be fetched again: it stays as stored until `freshUntil`. */
  metadata?: OAuthClient;
  freshUntil: number;
}

/** Whether `requested` is one of the document's redirect URIs (a loopback one on any port, RFC 8252 §7.3, as the provider allows). */
function listedRedirect(registered: string[], requested: string): boolean {
  const portless = (uri: string) => {
    try {
      const url = new URL(uri);
      if (url.protocol !== "http:" || !["127.0.0.1", "[::1]", "localhost"].includes(url.hostname)) return undefined;
      url.port = "";
      return url.href;
    } catch {
      return undefined;
    }
  };
  const requestedPortless = portless(requested);
  return registered.some((uri) => uri === requested || (requestedPortless !== undefined && portless(uri) === requestedPortless));
}

interface CimdResolver {
  discovery: ClientDiscovery;
  /** The client's checked document: from the cache while fresh, else fetched (at most once per request). */
  metadataFor(clientId: string, request: Request | undefined): Promise<OAuthClient>;
}

/** The provider's `clientDiscovery` entry for https client ids, and the document look-up it uses. */
export function cimdResolver(options: CimdOptions = {}): CimdResolver {
  const policy: MetadataFetchPolicy = {
    timeoutMs: options.timeoutMs ?? 5_000,
    maxBytes: options.maxBytes ?? 5 * 1024,
    allowHosts: new Set((options.allowHosts ?? []).map((host) => host.replace(/^\[|\]$/g, "").toLowerCase())),
    ...(options.ca ? { ca: options.ca } : {}),
  };
  const maxCacheMs = options.maxCacheMs ?? 60 * 60_000;
  const maxEntries = options.maxCacheEntries ?? 1000;
  const maxFetches = options.maxConcurrentFetches ?? 8;
  const cache = new Map<string, CacheEntry>();
  const inFlight = new Map<string, Promise<OAuthClient>>();
  // What one authorization request already fetched (the hook below, then the provider): a document
  // that may not be stored (no-store) is still fetched only once per request.
  const perRequest = new WeakMap<Request, Map<string, OAuthClient>>();

  const remember = (clientId: string, entry: CacheEntry) => {
    cache.delete(clientId);
    if (entry.freshUntil <= Date.now()) return;
    while (cache.size >= maxEntries) cache.delete(cache.keys().next().value!);
    cache.set(clientId, entry);
  };

  const fetchDocument = (clientId: string): Promise<OAuthClient> => {
    const running = inFlight.get(clientId);
    if (running) return running;
    if (inFlight.size >= maxFetches)
      throw new APIError("TOO_MANY_REQUESTS", { error: "temporarily_unavailable", error_description: "too many client metadata documents are being fetched" });
    const fetching = (async () => {
      try {
        const fetched = await fetchMetadataDocument(new URL(clientId), policy);
        const metadata = checkDocument(clientId, fetched.document);
        remember(clientId, { metadata, freshUntil: Date.now() + freshnessMs(fetched, maxCacheMs) });
        return metadata;
      } catch (error) {
        throw error instanceof MetadataFetchError ? invalidClient(error.message) : error;
      }
    })();
    inFlight.set(clientId, fetching);
    return fetching.finally(() => inFlight.delete(clientId));
  };

  const fresh = (clientId: string): CacheEntry | undefined => {
    const cached = cache.get(clientId);
    return cached && cached.freshUntil > Date.now() ? cached : undefined;
  };
  const metadataFor = async (clientId: string, request: Request | undefined): Promise<OAuthClient> => {
    const known = fresh(clientId)?.metadata ?? (request ? perRequest.get(request)?.get(clientId) : undefined);
    if (known) return known;
    const metadata = await fetchDocument(clientId);
    if (request) perRequest.set(request, (perRequest.get(request) ?? new Map<string, OAuthClient>()).set(clientId, metadata));
    return metadata;
  };

  const discovery: ClientDiscovery = {
    id: CIMD_DISCOVERY_ID,
    matches: (clientId) => clientId.startsWith("https://"),
    discoveryMetadata: { client_id_metadata_document_supported: true },
    resolve: async (ctx, clientId, existing) => {
      const problem = clientIdURLProblem(clientId);
      if (problem) throw invalidClient(problem);
      if (fresh(clientId) && existing) return existing;
      let metadata: OAuthClient;
      try {
        metadata = await metadataFor(clientId, ctx.request);
      } catch (error) {
        if (!existing) throw error;
        // Known already: kept as it is while its document cannot be fetched; tried again in a minute.
        ctx.context.logger.warn(`client metadata document ${clientId} could not be refreshed: ${describe(error)}`);
        remember(clientId, { freshUntil: Date.now() + RETRY_AFTER_FAILURE_MS });
        return existing;
      }
      const provider = ctx.context.getPlugin("oauth-provider") as { options: OAuthOptions<Scope[]> } | null;
      if (!provider) throw new Error("tether-cimd needs better-auth's oauth-provider plugin");
      const stored = await registerClientMetadataDocument(ctx, provider.options, {
        clientId,
        clientDiscoveryId: CIMD_DISCOVERY_ID,
        metadata,
        ...(existing ? { existingClient: existing } : {}),
      });
      return stored.client;
    },
  };
  return { discovery, metadataFor };
}

/**
 * The companion plugin: put it after `oauthProvider(...)` in better-auth's plugins. Besides the
 * discovery, a hook on the authorization endpoint answers a URL client id's problems as a 400 naming
 * them (the provider would send the browser to its error page, the right thing for an unknown client
 * id, but unclear for a document it fetched): an http URL, a document it cannot use, and a
 * `redirect_uri` the document does not list. Never a redirect to the client.
 */
export function cimdPlugin(options: CimdOptions = {}): BetterAuthPlugin {
  const resolver = cimdResolver(options);
  const authorizeChecks = createAuthMiddleware(async (ctx) => {
    const { client_id: clientId, redirect_uri: redirectUri } = (ctx.query ?? {}) as Record<string, unknown>;
    if (typeof clientId !== "string") return;
    if (/^http:\/\//i.test(clientId)) throw invalidClient("client_id URL must use https");
    if (!clientId.startsWith("https://")) return;
    const problem = clientIdURLProblem(clientId);
    if (problem) throw invalidClient(problem);
    const metadata = await resolver.metadataFor(clientId, ctx.request);
    if (typeof redirectUri === "string" && !listedRedirect(metadata.redirect_uris, redirectUri))
      throw new APIError("BAD_REQUEST", {
        error: "invalid_request",
        error_description: "redirect_uri is not one of the redirect_uris in the client's metadata document",
      });
  });
  return {
    id: CIMD_PLUGIN_ID,
    init(ctx) {
      extendOAuthProvider(ctx, { clientDiscovery: resolver.discovery });
    },
    hooks: { before: [{ matcher: (ctx) => ctx.path === "/oauth2/authorize", handler: authorizeChecks }] },
  };
}
