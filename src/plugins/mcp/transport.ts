import type { IncomingHttpHeaders } from "node:http";
import { Readable } from "node:stream";
import {
  createMcpHandler,
  isInitializeRequest,
  isLegacyRequest,
  WebStandardStreamableHTTPServerTransport,
  type AuthInfo,
  type Server,
} from "@modelcontextprotocol/server";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { SignedStateKey } from "../../crypto/signed-state.js";
import type { StreamLease } from "../../http/stream-limits.js";
import * as audit from "../host/audit.js";
import type { McpCaller } from "./credentials.js";
import { fastToolCall, serveFastToolCall } from "./fast-call.js";
import { legacySessionId, notifyDecisions, sessionDeclaresUrlElicitation, UrlElicitationRetries } from "./legacy-elicitation.js";
import { createMcpServer, type McpServerContext } from "./mcp-server.js";
import * as store from "./store.js";
import { serveListen, watchStream } from "./streams.js";
import { serveTaskListen, wantsTaskNotifications } from "./task-listen.js";
import type { McpTasks } from "./tasks.js";

export interface McpTransportOptions {
  /** The server's public base URL (no trailing slash): requests are rebuilt against it for the SDK. */
  baseURL: string;
  /** Where a person manages their devices, linked from tool results. */
  devicesURL: string;
  /** Signs the approval state a 2026-07-28 client echoes (approval.ts). */
  approvalKey: Parameters<typeof createMcpServer>[0]["approvalKey"];
  /** Signs the session id that carries a 2025-11-25 client's declared URL elicitation (legacy-elicitation.ts). */
  sessionKey: SignedStateKey;
  recheckIntervalMs: number;
  /** Closers of open notification streams (the plugin closes them before the server stops). */
  openStreams: Set<() => void>;
  /** Tool calls that outlive their request (the tasks extension, tasks.ts). */
  tasks: McpTasks;
}

/** Answers an authenticated /mcp request; `lease` is the request's stream slot when it holds a notification stream. */
export type McpResponder = (request: FastifyRequest, reply: FastifyReply, caller: McpCaller, lease: StreamLease | undefined) => Promise<FastifyReply>;

/**
 * Hands an authenticated request to the MCP SDK with a fresh server for its caller: a 2026-07-28 request
 * to the SDK's per-request handler (or, for `subscriptions/listen`, to a held stream), 2025-era traffic to a
 * stateless web-standard transport, fed the body Fastify already parsed.
 */
export function createMcpResponder(fastify: FastifyInstance, options: McpTransportOptions): McpResponder {
  const { baseURL, recheckIntervalMs, openStreams } = options;
  const db = fastify.tetherDb;

  // Blob resource_links are readable through resources/read when the app keeps blobs.
  const blobs = fastify.hasDecorator("tetherBlobs") ? { service: fastify.tetherBlobs, urlPrefix: `${baseURL}/api/host/blobs/` } : undefined;
  const urlElicitations = new UrlElicitationRetries(db);
  const contextFor = (caller: McpCaller, era: "legacy" | "modern", declaresUrlElicitation = false): McpServerContext => {
    let allowsActions: Promise<boolean> | undefined;
    return {
      ...(declaresUrlElicitation ? { urlElicitations } : {}),
      host: fastify.tetherHost,
      caller,
      // Read once per request, and only by a request that needs it (tools/list, an action tool).
      allowActions: () => (allowsActions ??= store.allowsActions(db, caller.userId)),
      devicesURL: options.devicesURL,
      era,
      approvalKey: options.approvalKey,
      tasks: options.tasks,
      ...(blobs ? { blobs } : {}),
      audit: async (entry) => audit.record(fastify.tetherAudit, entry),
      onInternalError: (error) => fastify.log.error({ err: error }, "mcp: tool call failed"),
    };
  };
  const serverFor = (caller: McpCaller, era: "legacy" | "modern", declaresUrlElicitation = false) =>
    createMcpServer(contextFor(caller, era, declaresUrlElicitation));

  /**
   * The SDK's HTTP entry for 2026-07-28, per request (`server/discover`, the `_meta` envelope, the
   * standard headers, `resultType`); the caller, authenticated above, rides in `authInfo`. 2025-era
   * traffic goes to `serveLegacy` below (the SDK's own routing predicate decides), as before: JSON answers.
   */
  const handler = createMcpHandler((ctx) => serverFor(callerOf(ctx.authInfo), ctx.era), {
    legacy: "reject",
    onerror: (error) => fastify.log.debug({ err: error }, "mcp: request refused by the protocol layer"),
  });
  fastify.addHook("onClose", () => handler.close());

  return async (request, reply, caller, lease) => {
    // A plain 2026-07-28 tools/call skips the SDK's HTTP round trip (fast-call.ts says why and when).
    const fast = lease ? undefined : fastToolCall(request);
    if (fast) return serveFastToolCall(fast, contextFor(caller, "modern"), request, reply);
    const webRequest = new Request(baseURL + request.url, { method: request.method, headers: protocolHeaders(request.headers) });
    if (request.method === "POST" && (claimsModernRevision(request) || !(await isLegacyRequest(webRequest, request.body)))) {
      if (lease && wantsTaskNotifications(request.body)) {
        return serveTaskListen(fastify, {
          request,
          reply,
          caller,
          lease,
          tasks: options.tasks,
          devicesURL: options.devicesURL,
          recheckIntervalMs,
          openStreams,
        });
      }
      if (lease) {
        const factory = (ctx: { authInfo?: AuthInfo; era: "legacy" | "modern" }) => serverFor(callerOf(ctx.authInfo), ctx.era);
        return serveListen(fastify, { request, reply, caller, authInfo: authInfoOf(caller), lease, webRequest, factory, recheckIntervalMs, openStreams });
      }
      const response = await handler.fetch(webRequest, { authInfo: authInfoOf(caller), parsedBody: request.body });
      reply.code(response.status);
      for (const [name, value] of response.headers) reply.header(name, value);
      return reply.send(response.body ? Buffer.from(await response.arrayBuffer()) : undefined);
    }
    const declaresUrlElicitation = sessionDeclaresUrlElicitation(options.sessionKey, request.headers["mcp-session-id"]);
    const server = serverFor(caller, "legacy", declaresUrlElicitation);
    const decisions = declaresUrlElicitation ? urlElicitations : undefined;
    return serveLegacy(fastify, {
      request,
      reply,
      caller,
      webRequest,
      lease,
      server,
      decisions,
      sessionKey: options.sessionKey,
      recheckIntervalMs,
      openStreams,
    });
  };
}

interface LegacyRequest {
  request: FastifyRequest;
  reply: FastifyReply;
  caller: McpCaller;
  webRequest: Request;
  lease: StreamLease | undefined;
  /** The caller's server for this request (created knowing whether its session declared URL elicitation). */
  server: Server;
  /** When the session declared URL elicitation: its notification stream hears of the owner's decisions. */
  decisions: UrlElicitationRetries | undefined;
  sessionKey: SignedStateKey;
  recheckIntervalMs: number;
  openStreams: Set<() => void>;
}

/**
 * 2025-era traffic: a fresh stateless transport per request; a GET holds the notification stream. The
 * one session id Tether gives, to a client that declares URL-mode elicitation, carries that declaration
 * to whichever replica serves its later requests (legacy-elicitation.ts).
 */
async function serveLegacy(fastify: FastifyInstance, legacy: LegacyRequest): Promise<FastifyReply> {
  const { request, reply, caller, webRequest, lease, server, decisions, sessionKey, recheckIntervalMs, openStreams } = legacy;
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  const response = await transport.handleRequest(webRequest, { parsedBody: request.body });
  reply.code(response.status);
  for (const [name, value] of response.headers) reply.header(name, value);
  const sessionId = response.status === 200 && isInitializeRequest(request.body) ? legacySessionId(sessionKey, request.body) : undefined;
  if (sessionId) reply.header("mcp-session-id", sessionId);
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
    const stopNotifying = decisions
      ? notifyDecisions(
          fastify.tetherHost,
          decisions,
          caller,
          // Straight onto the transport: the SDK's server checks the capabilities of an `initialize` this
          // stateless server never saw; the declaration is the signed session id's.
          (elicitationId) => void transport.send({ jsonrpc: "2.0", method: "notifications/elicitation/complete", params: { elicitationId } }).catch(() => {}),
          (error) => fastify.log.warn({ err: error }, "mcp: could not read the decided proposals for elicitation/complete"),
        )
      : undefined;
    request.raw.once("close", () => {
      openStreams.delete(close);
      close();
      stopNotifying?.();
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

/**
 * The headers the SDK reads (the `Mcp-*` ones, `Content-Type`, `Accept`, `Last-Event-ID`), as a plain
 * object: the credential, Host and Origin were checked before the route (the SDK gets the caller in
 * `authInfo`), and a `Request` built from a copy of every header cost twice as much (profiled).
 */
function protocolHeaders(incoming: IncomingHttpHeaders): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name in incoming) {
    if (!(name.startsWith("mcp-") || name === "content-type" || name === "accept" || name === "last-event-id")) continue;
    const value = incoming[name];
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return headers;
}
