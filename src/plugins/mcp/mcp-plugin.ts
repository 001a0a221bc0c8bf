import { SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/server";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { signedStateKey } from "../../crypto/signed-state.js";
import { HttpError } from "../../http/errors.js";
import type { RateLimiter } from "../host/rate-limit.js";
import { SCOPES } from "../session/scopes.js";
import { authenticate, McpAuthError, type McpCaller, type OAuthVerifier } from "./credentials.js";
import { metadataRoutes } from "./metadata-routes.js";
import { hasMcpOAuth, oauthIssuer, oauthVerifier } from "./oauth.js";
import { McpTasks, type TaskSettings } from "./tasks.js";
import { createMcpResponder, type McpResponder } from "./transport.js";

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
  /** The tasks extension (2026-07-28): how long a task is kept, how long a call may take before it is one. */
  tasks?: TaskSettings;
}

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
    /** Closers of open notification streams: the server closes them before it stops. */
    const openStreams = new Set<() => void>();
    // Tool calls that outlive their request, as rows any replica can answer for (tasks.ts).
    const tasks = new McpTasks(fastify.tetherDb, options.tasks);
    fastify.addHook("preClose", async () => {
      for (const close of openStreams) close();
      openStreams.clear();
      tasks.close();
    });

    // OAuth is on when the auth instance carries the MCP OAuth plugins (see oauth.ts).
    const auth = fastify.tetherAuth;
    // Signs the approval state a 2026-07-28 client echoes (approval.ts), from the app secret.
    const secret = (await auth.$context).secret;
    const approvalKey = signedStateKey(secret, "mcp-approval");
    // And the session id that carries a 2025-11-25 client's URL elicitation (legacy-elicitation.ts).
    const sessionKey = signedStateKey(secret, "mcp-legacy-session");
    const oauth = hasMcpOAuth(auth) ? { issuer: await oauthIssuer(auth), verify: oauthVerifier(auth, fastify.tetherDb, resourceURL) } : undefined;
    const recheckIntervalMs = options.recheckIntervalMs ?? 60_000;
    const respond = createMcpResponder(fastify, { baseURL, devicesURL: `${baseURL}/devices`, approvalKey, sessionKey, recheckIntervalMs, openStreams, tasks });
    const handle = requestHandler(fastify, {
      metadataURL: `${new URL(resourceURL).origin}/.well-known/oauth-protected-resource${resourcePath}`,
      verify: oauth?.verify,
      rateLimiter: options.rateLimiter,
      respond,
    });
    metadataRoutes(fastify, { resourceURL, baseURL, issuer: oauth?.issuer, auth });

    await fastify.register(async (endpoint) => {
      endpoint.setErrorHandler(jsonRpcError);
      endpoint.route({ method: ["GET", "POST", "DELETE"], url: resourcePath, handler: handle });
    });
  },
  { name: "tether-mcp", fastify: "5.x", dependencies: ["tether-db", "tether-audit", "tether-auth", "tether-session", "tether-host", "tether-streams"] },
);

interface RequestHandlerOptions {
  /** Where a refused client finds the protected-resource metadata (the `WWW-Authenticate` header names it). */
  metadataURL: string;
  verify: OAuthVerifier | undefined;
  rateLimiter: RateLimiter | undefined;
  respond: McpResponder;
}

/**
 * Every /mcp request: authenticates its bearer credential (a refusal is OAuth's `WWW-Authenticate`
 * answer), counts it against the credential's rate limit, narrows it to the credential's devices,
 * admits a notification stream against the stream caps, then hands it to `respond`.
 */
function requestHandler(fastify: FastifyInstance, { metadataURL, verify, rateLimiter, respond }: RequestHandlerOptions) {
  const refuse = (reply: FastifyReply, error: McpAuthError) => {
    const scope = error.error === "insufficient_scope" ? `, scope="${SCOPES.hostCall}"` : "";
    const code = error.error === "invalid_request" ? "" : `, error="${error.error}"`;
    return reply
      .code(error.statusCode)
      .header("www-authenticate", `Bearer resource_metadata="${metadataURL}"${code}${scope}`)
      .send({ error: error.error, error_description: error.message });
  };

  /** Per credential, after authentication: a flood of refused credentials is the auth API's (per-address) concern. */
  const limitRate = async (caller: McpCaller, reply: FastifyReply) => {
    if (!rateLimiter) return;
    const retryAfter = await rateLimiter.hit(caller.credentialKey).catch((error: unknown) => {
      throw new HttpError(503, "RATE_LIMIT_UNAVAILABLE", "/mcp is unavailable for a moment (the shared rate limit cannot be checked); try again shortly", {
        cause: error,
      });
    });
    if (retryAfter === 0) return;
    reply.header("retry-after", String(retryAfter));
    throw new HttpError(429, "RATE_LIMITED", `Too many requests to /mcp with this credential; try again in ${retryAfter} s`);
  };

  return async (request: FastifyRequest, reply: FastifyReply) => {
    let caller: McpCaller;
    try {
      caller = await authenticate(request, fastify.tetherDb, verify);
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
}

/** JSON-RPC errors, per the spec, for what fails before the transport sees the message. */
function jsonRpcError(error: FastifyError, _request: FastifyRequest, reply: FastifyReply) {
  const status = error.statusCode ?? 500;
  // Refusals of the request as a whole (rate limit, stream caps) are the app's `{ code, message }`.
  if (status >= 500 || error instanceof HttpError) throw error;
  const parse = error.code === "FST_ERR_CTP_INVALID_JSON_BODY" || error.code === "FST_ERR_CTP_EMPTY_JSON_BODY" || error instanceof SyntaxError;
  return reply
    .code(status)
    .send({ jsonrpc: "2.0", id: null, error: { code: parse ? JSON_RPC_PARSE_ERROR : JSON_RPC_INVALID_REQUEST, message: error.message } });
}

/** Whether a POSTed body is a `subscriptions/listen` request (2026-07-28's notification stream). */
function isListen(body: unknown): boolean {
  return typeof body === "object" && body !== null && !Array.isArray(body) && (body as { method?: unknown }).method === "subscriptions/listen";
}
