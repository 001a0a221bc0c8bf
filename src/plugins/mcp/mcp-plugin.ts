import { Readable } from "node:stream";
import { createMcpHandler, isLegacyRequest, SUPPORTED_PROTOCOL_VERSIONS, WebStandardStreamableHTTPServerTransport, type AuthInfo } from "@modelcontextprotocol/server";
import { Type } from "@sinclair/typebox";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { signedStateKey } from "../../crypto/signed-state.js";
import { HttpError } from "../../http/errors.js";
import { jsonResponses } from "../../http/response-schemas.js";
import type { StreamLease } from "../../http/stream-limits.js";
import { toWebHeaders } from "../../http/web-headers.js";
import { SCOPES } from "../session/scopes.js";
import * as audit from "../host/audit.js";
import type { RateLimiter } from "../host/rate-limit.js";
import { authenticate, McpAuthError, type McpCaller } from "./credentials.js";
import { hasMcpOAuth, oauthIssuer, oauthVerifier } from "./oauth.js";
import { createMcpServer } from "./mcp-server.js";
import * as store from "./store.js";
import { serveListen, watchStream } from "./streams.js";

export interface McpPluginOptions {
  /** The endpoint's public URL (the OAuth "resource"); default `<auth base URL>/mcp`. */
  resourceURL?: string;
  /** How often an open notification stream re-checks its credential (default 60 s). */
  recheckIntervalMs?: number;
  /**
   * Counts every request per credential (an API token, or an OAuth access token); past its limit a
   * request is refused with 429 `RATE_LIMITED` and `Retry-After`, and a limiter that cannot answer
   * (Redis away) refuses with 503 `RATE_LIMIT_UNAVAILABLE`. The example app passes one in production.
   */
  rateLimiter?: RateLimiter;
}

/** RFC 9728's protected-resource metadata, as far as this server fills it in. */
const ResourceMetadata = Type.Object({
  resource: Type.String(),
  authorization_servers: Type.Array(Type.String()),
  scopes_supported: Type.Array(Type.String()),
  bearer_methods_supported: Type.Array(Type.String()),
  resource_name: Type.String(),
});

const JSON_RPC_PARSE_ERROR = -32700;
const JSON_RPC_INVALID_REQUEST = -32600;
/** MCP removed JSON-RPC batching in this revision: from it on, a POST carries one message. */
const FIRST_VERSION_WITHOUT_BATCHES = "2025-06-18";

/**
 * The JSON-RPC error for a batch sent at a protocol version without batches (the version a request
 * declares in `MCP-Protocol-Version`; without the header the spec has the server assume 2025-03-26,
 * which batches). The SDK's transport accepts batches at any version; an unsupported version is left
 * for it to refuse in its own words.
 */
function batchRefusal(request: FastifyRequest): object | undefined {
  if (request.method !== "POST" || !Array.isArray(request.body)) return undefined;
  const version = request.headers["mcp-protocol-version"];
  if (typeof version !== "string" || !SUPPORTED_PROTOCOL_VERSIONS.includes(version) || version < FIRST_VERSION_WITHOUT_BATCHES) return undefined;
  const message = `Invalid Request: MCP ${version} has no JSON-RPC batches; send each message in a request of its own`;
  return { jsonrpc: "2.0", id: null, error: { code: JSON_RPC_INVALID_REQUEST, message } };
}

/**
 * A remote MCP server over each user's devices: Streamable HTTP at `/mcp` (the SDK's `Server` and
 * web-standard transport, fed the body Fastify already parsed) and RFC 9728's protected-resource
 * metadata. Stateless: every POST carries its own bearer credential and gets a fresh server, so any
 * replica answers any request and a revoked token or deactivated user fails on the very next request.
 * A GET holds a notification stream that sends `notifications/tools/list_changed` when one of the
 * user's devices comes, goes or changes its tools, and closes when the credential stops working.
 */
export const mcpPlugin = fp<McpPluginOptions>(
  async (fastify, options) => {
    const baseURL = String(fastify.tetherAuth.options.baseURL).replace(/\/$/, "");
    const resourceURL = options.resourceURL ?? `${baseURL}/mcp`;
    const resourcePath = new URL(resourceURL).pathname;
    const metadataURL = `${new URL(resourceURL).origin}/.well-known/oauth-protected-resource${resourcePath}`;
    const devicesURL = `${baseURL}/devices`;
    const recheckIntervalMs = options.recheckIntervalMs ?? 60_000;
    const db = fastify.tetherDb;
    /** Closers of open notification streams: the server closes them before it stops. */
    const openStreams = new Set<() => void>();
    fastify.addHook("preClose", async () => {
      for (const close of openStreams) close();
      openStreams.clear();
    });

    // OAuth is on when the auth instance carries the MCP OAuth plugins (see oauth.ts).
    const auth = fastify.tetherAuth;
    // Signs the approval state a 2026-07-28 client echoes (approval.ts), from the app secret.
    const approvalKey = signedStateKey((await auth.$context).secret, "mcp-approval");
    const oauth = hasMcpOAuth(auth) ? { issuer: await oauthIssuer(auth), verify: oauthVerifier(auth, db, resourceURL) } : undefined;
    const metadata = {
      resource: resourceURL,
      authorization_servers: oauth ? [oauth.issuer] : [],
      scopes_supported: [SCOPES.hostCall, SCOPES.hostRead],
      bearer_methods_supported: ["header"],
      resource_name: "Tether",
    };

    const refuse = (reply: FastifyReply, error: McpAuthError) => {
      const scope = error.error === "insufficient_scope" ? `, scope="${SCOPES.hostCall}"` : "";
      const code = error.error === "invalid_request" ? "" : `, error="${error.error}"`;
      return reply
        .code(error.statusCode)
        .header("www-authenticate", `Bearer resource_metadata="${metadataURL}"${code}${scope}`)
        .send({ error: error.error, error_description: error.message });
    };

    // Blob resource_links are readable through resources/read when the app keeps blobs.
    const blobs = fastify.hasDecorator("tetherBlobs") ? { service: fastify.tetherBlobs, urlPrefix: `${String(fastify.tetherAuth.options.baseURL).replace(/\/$/, "")}/api/host/blobs/` } : undefined;
    const serverFor = (caller: McpCaller, era: "legacy" | "modern") => {
      let allowsActions: Promise<boolean> | undefined;
      return createMcpServer({
        host: fastify.tetherHost,
        caller,
        // Read once per request, and only by a request that needs it (tools/list, an action tool).
        allowActions: () => (allowsActions ??= store.allowsActions(db, caller.userId)),
        devicesURL,
        era,
        approvalKey,
        ...(blobs ? { blobs } : {}),
        audit: async (entry) => audit.record(fastify.tetherAudit, entry),
        onInternalError: (error) => fastify.log.error({ err: error }, "mcp: tool call failed"),
      });
    };

    /** Per credential, after authentication: a flood of refused credentials is the auth API's (per-address) concern. */
    const limitRate = async (caller: McpCaller, reply: FastifyReply) => {
      if (!options.rateLimiter) return;
      const retryAfter = await options.rateLimiter.hit(caller.credentialKey).catch((error: unknown) => {
        throw new HttpError(503, "RATE_LIMIT_UNAVAILABLE", "/mcp is unavailable for a moment (the shared rate limit cannot be checked); try again shortly", { cause: error });
      });
      if (retryAfter === 0) return;
      reply.header("retry-after", String(retryAfter));
      throw new HttpError(429, "RATE_LIMITED", `Too many requests to /mcp with this credential; try again in ${retryAfter} s`);
    };

    /** Hands the request to a fresh stateless transport; Fastify already parsed the body. */
    const handle = async (request: FastifyRequest, reply: FastifyReply) => {
      let caller: McpCaller;
      try {
        caller = await authenticate(request, db, oauth?.verify);
      } catch (error) {
        if (error instanceof McpAuthError) return refuse(reply, error);
        throw error;
      }
      await limitRate(caller, reply);
      // The devices this credential may touch (a token's or an OAuth consent's grant); none stored: all.
      if (caller.credential) {
        const deviceIds = await fastify.tetherHost.deviceGrant(caller.userId, caller.credential);
        if (deviceIds) caller = { ...caller, deviceIds };
      }
      const batch = batchRefusal(request);
      if (batch) return reply.code(400).send(batch);
      // A GET (2025) or a subscriptions/listen (2026-07-28) holds a notification stream: admitted (or
      // refused) before it opens, against the same per-user and per-credential caps.
      const holdsStream = request.method === "GET" || isListen(request.body);
      const lease = holdsStream ? await fastify.tetherStreams.admit(reply, { kind: "mcp", userId: caller.userId, credential: caller.credentialKey }) : undefined;
      try {
        return await respond(request, reply, caller, lease);
      } catch (error) {
        lease?.release();
        throw error;
      }
    };

    /**
     * The SDK's HTTP entry for 2026-07-28, per request (`server/discover`, the `_meta` envelope, the
     * standard headers, `resultType`); the caller, authenticated above, rides in `authInfo`. 2025-era
     * traffic goes to `legacy` below (the SDK's own routing predicate decides), as before: JSON answers.
     */
    const handler = createMcpHandler((ctx) => serverFor(callerOf(ctx.authInfo), ctx.era), {
      legacy: "reject",
      onerror: (error) => fastify.log.debug({ err: error }, "mcp: request refused by the protocol layer"),
    });
    fastify.addHook("onClose", () => handler.close());

    const respond = async (request: FastifyRequest, reply: FastifyReply, caller: McpCaller, lease: StreamLease | undefined) => {
      const webRequest = new Request(new URL(request.url, baseURL), { method: request.method, headers: toWebHeaders(request.headers) });
      if (request.method === "POST" && (claimsModernRevision(request) || !(await isLegacyRequest(webRequest, request.body)))) {
        if (lease) {
          const factory = (ctx: { authInfo?: AuthInfo; era: "legacy" | "modern" }) => serverFor(callerOf(ctx.authInfo), ctx.era);
          return serveListen(fastify, { request, reply, caller, authInfo: authInfoOf(caller), lease, webRequest, factory, recheckIntervalMs, openStreams });
        }
        const response = await handler.fetch(webRequest, { authInfo: authInfoOf(caller), parsedBody: request.body });
        reply.code(response.status);
        for (const [name, value] of response.headers) reply.header(name, value);
        return reply.send(response.body ? Buffer.from(await response.arrayBuffer()) : undefined);
      }
      return legacy(request, reply, caller, webRequest, lease);
    };

    /** 2025-era traffic: a fresh stateless transport per request; a GET holds the notification stream. */
    const legacy = async (request: FastifyRequest, reply: FastifyReply, caller: McpCaller, webRequest: Request, lease: StreamLease | undefined) => {
      const server = serverFor(caller, "legacy");
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      const response = await transport.handleRequest(webRequest, { parsedBody: request.body });
      reply.code(response.status);
      for (const [name, value] of response.headers) reply.header(name, value);
      if (request.method === "GET" && response.status === 200 && response.body) {
        // Long-lived by design: exempt from the server's idle-socket timeout (CONNECTION_TIMEOUT_MS).
        reply.raw.setTimeout(0);
        const close = watchStream(fastify, {
          caller,
          recheckIntervalMs,
          onToolsChanged: () => void server.sendToolListChanged().catch(() => {}),
          // Ends the transport's stream, and so the response.
          end: () => void server.close().catch(() => {}),
        });
        openStreams.add(close);
        request.raw.once("close", () => {
          openStreams.delete(close);
          close();
          lease?.release();
        });
        // The head leaves now: otherwise it waits for the transport's first write (a keep-alive, 15 s on),
        // and the client cannot tell its stream is open.
        reply.raw.once("pipe", () => reply.raw.flushHeaders());
        return reply.send(Readable.fromWeb(response.body as never));
      }
      lease?.release();
      const body = response.body ? Buffer.from(await response.arrayBuffer()) : undefined;
      await server.close();
      return reply.send(body);
    };

    const metadataSchema = { response: jsonResponses({ 200: ResourceMetadata }) };
    fastify.get("/.well-known/oauth-protected-resource", { schema: metadataSchema }, async () => metadata);
    fastify.get(`/.well-known/oauth-protected-resource${resourcePath}`, { schema: metadataSchema }, async () => metadata);
    if (oauth) {
      // RFC 8414's location for an issuer with a path (`<base>/api/auth`) lies outside better-auth's base
      // path; the provider plugin answers it when handed the request. A client that knows only the
      // origin (MCP 2025-03-26 discovery) looks at the root, so the same document is served there too.
      const issuerPath = new URL(oauth.issuer).pathname.replace(/\/$/, "");
      const metadataPath = `/.well-known/oauth-authorization-server${issuerPath}`;
      const serveMetadata = async (request: FastifyRequest, reply: FastifyReply) => {
        const query = request.url.includes("?") ? request.url.slice(request.url.indexOf("?")) : "";
        const response = await auth.handler(new Request(new URL(metadataPath + query, baseURL)));
        reply.code(response.status);
        for (const [name, value] of response.headers) reply.header(name, value);
        return reply.send(await response.text());
      };
      fastify.get(metadataPath, serveMetadata);
      if (issuerPath !== "") fastify.get("/.well-known/oauth-authorization-server", serveMetadata);
    }

    await fastify.register(async (endpoint) => {
      // JSON-RPC errors, per the spec, for what fails before the transport sees the message.
      endpoint.setErrorHandler((error: FastifyError, _request, reply) => {
        const status = error.statusCode ?? 500;
        // Refusals of the request as a whole (rate limit, stream caps) are the app's `{ code, message }`.
        if (status >= 500 || error instanceof HttpError) throw error;
        const parse = error.code === "FST_ERR_CTP_INVALID_JSON_BODY" || error.code === "FST_ERR_CTP_EMPTY_JSON_BODY" || error instanceof SyntaxError;
        return reply.code(status).send({ jsonrpc: "2.0", id: null, error: { code: parse ? JSON_RPC_PARSE_ERROR : JSON_RPC_INVALID_REQUEST, message: error.message } });
      });
      endpoint.route({ method: ["GET", "POST", "DELETE"], url: resourcePath, handler: handle });
    });
  },
  { name: "tether-mcp", fastify: "5.x", dependencies: ["tether-db", "tether-audit", "tether-auth", "tether-session", "tether-host", "tether-streams"] },
);

/** Whether a POSTed body is a `subscriptions/listen` request (2026-07-28's notification stream). */
function isListen(body: unknown): boolean {
  return typeof body === "object" && body !== null && !Array.isArray(body) && (body as { method?: unknown }).method === "subscriptions/listen";
}

/** The revisions the SDK serves without `initialize` (its own list is not exported). */
const MODERN_REVISIONS = new Set(["2026-07-28"]);

/**
 * A request naming a modern revision in `MCP-Protocol-Version` is the modern path's to answer, whatever
 * its body (the SDK's own routing says so: a missing or mismatched envelope is the modern path's -32602
 * or -32020). Knowing it from the header spares `isLegacyRequest` classifying the body a second time
 * (the handler classifies it anyway).
 */
function claimsModernRevision(request: FastifyRequest): boolean {
  const version = request.headers["mcp-protocol-version"];
  return typeof version === "string" && MODERN_REVISIONS.has(version);
}

/** The authenticated caller, handed through the SDK's `authInfo` to the per-request server factory. */
function authInfoOf(caller: McpCaller): AuthInfo {
  return { token: "", clientId: caller.credential ?? caller.credentialKey, scopes: [], extra: { caller } };
}

function callerOf(authInfo: AuthInfo | undefined): McpCaller {
  const caller = authInfo?.extra?.caller as McpCaller | undefined;
  if (!caller) throw new Error("mcp: a request reached the server factory without its authenticated caller");
  return caller;
}
