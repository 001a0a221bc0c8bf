import { Readable } from "node:stream";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { Type } from "@sinclair/typebox";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { jsonResponses } from "../../http/response-schemas.js";
import { toWebHeaders } from "../../http/web-headers.js";
import { onUserChanged } from "../auth/user-admin.js";
import * as audit from "../host/audit.js";
import { HOST_CALL_SCOPE } from "../host/callers.js";
import { authenticate, McpAuthError, type McpCaller } from "./credentials.js";
import { hasMcpOAuth, oauthIssuer, oauthVerifier } from "./oauth.js";
import { createMcpServer } from "./mcp-server.js";
import * as store from "./store.js";

export interface McpPluginOptions {
  /** The endpoint's public URL (the OAuth "resource"); default `<auth base URL>/mcp`. */
  resourceURL?: string;
  /** How often an open notification stream re-checks its credential (default 60 s). */
  recheckIntervalMs?: number;
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
    const oauth = hasMcpOAuth(auth) ? { issuer: await oauthIssuer(auth), verify: oauthVerifier(auth, db, resourceURL) } : undefined;
    const metadata = {
      resource: resourceURL,
      authorization_servers: oauth ? [oauth.issuer] : [],
      scopes_supported: [HOST_CALL_SCOPE],
      bearer_methods_supported: ["header"],
      resource_name: "Tether",
    };

    const refuse = (reply: FastifyReply, error: McpAuthError) => {
      const scope = error.error === "insufficient_scope" ? `, scope="${HOST_CALL_SCOPE}"` : "";
      const code = error.error === "invalid_request" ? "" : `, error="${error.error}"`;
      return reply
        .code(error.statusCode)
        .header("www-authenticate", `Bearer resource_metadata="${metadataURL}"${code}${scope}`)
        .send({ error: error.error, error_description: error.message });
    };

    const serverFor = (caller: McpCaller) => {
      let allowsActions: Promise<boolean> | undefined;
      return createMcpServer({
        host: fastify.tetherHost,
        caller,
        // Read once per request, and only by a request that needs it (tools/list, an action tool).
        allowActions: () => (allowsActions ??= store.allowsActions(db, caller.userId)),
        devicesURL,
        audit: async (entry) => audit.record(fastify.tetherAudit, entry),
        onInternalError: (error) => fastify.log.error({ err: error }, "mcp: tool call failed"),
      });
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
      const server = serverFor(caller);
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      const webRequest = new Request(new URL(request.url, baseURL), { method: request.method, headers: toWebHeaders(request.headers) });
      const response = await transport.handleRequest(webRequest, { parsedBody: request.body });
      reply.code(response.status);
      for (const [name, value] of response.headers) reply.header(name, value);
      if (request.method === "GET" && response.status === 200 && response.body) {
        // Long-lived by design: exempt from the server's idle-socket timeout (CONNECTION_TIMEOUT_MS).
        reply.raw.setTimeout(0);
        const close = holdNotificationStream(fastify, caller, server, recheckIntervalMs);
        openStreams.add(close);
        request.raw.once("close", () => {
          openStreams.delete(close);
          close();
        });
        return reply.send(Readable.fromWeb(response.body as never));
      }
      const body = response.body ? Buffer.from(await response.arrayBuffer()) : undefined;
      await server.close();
      return reply.send(body);
    };

    const metadataSchema = { response: jsonResponses({ 200: ResourceMetadata }) };
    fastify.get("/.well-known/oauth-protected-resource", { schema: metadataSchema }, async () => metadata);
    fastify.get(`/.well-known/oauth-protected-resource${resourcePath}`, { schema: metadataSchema }, async () => metadata);
    if (oauth) {
      // RFC 8414's location for an issuer with a path (`<base>/api/auth`) lies outside better-auth's base
      // path; the provider plugin answers it when handed the request.
      fastify.get(`/.well-known/oauth-authorization-server${new URL(oauth.issuer).pathname.replace(/\/$/, "")}`, async (request, reply) => {
        const response = await auth.handler(new Request(new URL(request.url, baseURL)));
        reply.code(response.status);
        for (const [name, value] of response.headers) reply.header(name, value);
        return reply.send(await response.text());
      });
    }

    await fastify.register(async (endpoint) => {
      // JSON-RPC errors, per the spec, for what fails before the transport sees the message.
      endpoint.setErrorHandler((error: FastifyError, _request, reply) => {
        const status = error.statusCode ?? 500;
        if (status >= 500) throw error;
        const parse = error.code === "FST_ERR_CTP_INVALID_JSON_BODY" || error.code === "FST_ERR_CTP_EMPTY_JSON_BODY" || error instanceof SyntaxError;
        return reply.code(status).send({ jsonrpc: "2.0", id: null, error: { code: parse ? JSON_RPC_PARSE_ERROR : JSON_RPC_INVALID_REQUEST, message: error.message } });
      });
      endpoint.route({ method: ["GET", "POST", "DELETE"], url: resourcePath, handler: handle });
    });
  },
  { name: "tether-mcp", fastify: "5.x", dependencies: ["tether-db", "tether-audit", "tether-auth", "tether-session", "tether-host"] },
);

/**
 * Holds a GET stream open: tools/list_changed whenever the user's devices change, until the client
 * leaves or the credential stops working (re-checked when the user's tokens change in this process,
 * and every interval). Returns the function that ends it.
 */
function holdNotificationStream(fastify: FastifyInstance, caller: McpCaller, server: Server, recheckIntervalMs: number): () => void {
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    stopWatching();
    stopUserChanges();
    clearInterval(timer);
    // Ends the transport's stream, and so the response.
    server.close().catch(() => {});
  };
  const recheck = () => {
    caller.stillValid().then(
      (valid) => valid || close(),
      (error: unknown) => fastify.log.warn({ err: error }, "mcp: credential re-check failed"),
    );
  };
  const stopWatching = fastify.tetherHost.watch(caller.userId, (topic) => {
    if (topic === "devices") server.sendToolListChanged().catch(() => {});
  });
  const stopUserChanges = onUserChanged(fastify.tetherAuth, (userId) => {
    if (userId === caller.userId) recheck();
  });
  const timer = setInterval(recheck, recheckIntervalMs);
  timer.unref();
  return close;
}
