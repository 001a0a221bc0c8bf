import type { ServerContext } from "@modelcontextprotocol/server";
import type { FastifyReply, FastifyRequest } from "fastify";
import { connectionClosed } from "../../http/connection-signal.js";
import { SERVER_INFO, toolCallHandler, type McpServerContext } from "./mcp-server.js";
import { TASKS_EXTENSION } from "./tasks.js";

/**
 * The one hand-written path past the SDK: a plain 2026-07-28 `tools/call`, the request an agent sends
 * most, answered by the same handler the SDK server runs (`toolCallHandler`) and encoded as the SDK
 * encodes it (`resultType`, the server's identity in `_meta`).
 *
 * Why: profiled under `npm run bench -- mcp`, a `stat` through the SDK's `createMcpHandler` cost about
 * 1.8× the server CPU of `POST /api/host/calls`, and the tool was not the difference: of the server
 * thread's time, the SDK's classification, dispatch and encoding took 10%, zod guards over the same
 * message at each layer 9%, the web `Response` and its body read back 7%, the web `Request` built for
 * it 4%, the per-request transport's close chain (an `SdkError` per close) 3%, and the garbage of it
 * all. A `Server` reused across requests would save only its construction (1.3%).
 *
 * Only a request whose every part is known takes this path: the standard headers agreeing with the
 * body, an id, a tool name, object arguments, and an envelope of the three keys 2026-07-28 defines with
 * well-formed values; no `requestState` or `inputResponses` (an approval retry), and a client declaring
 * neither URL elicitation nor the tasks extension (both can turn the answer into something other than a
 * tool result). Anything else, valid or not, goes to the SDK, which answers or refuses it in its own
 * words. Errors and results alike are the handler's; the tests compare this path's answers with the SDK's.
 */
export function fastToolCall(request: FastifyRequest): FastCall | undefined {
  const headers = request.headers;
  if (request.method !== "POST" || headers["mcp-protocol-version"] !== MODERN || headers["mcp-method"] !== "tools/call") return undefined;
  if (!isJson(headers["content-type"]) || !acceptsBoth(headers.accept)) return undefined;
  const body = request.body;
  if (!isPlainObject(body) || !onlyKeys(body, MESSAGE_KEYS) || body.jsonrpc !== "2.0" || body.method !== "tools/call") return undefined;
  const id = body.id;
  if (!(typeof id === "string" || Number.isSafeInteger(id))) return undefined;
  const params = body.params;
  if (!isPlainObject(params) || !onlyKeys(params, PARAMS_KEYS)) return undefined;
  const { name, arguments: args, _meta: meta } = params;
  if (typeof name !== "string" || name === "" || headers["mcp-name"] !== name) return undefined;
  if (args !== undefined && !isPlainObject(args)) return undefined;
  if (!isPlainObject(meta) || !onlyKeys(meta, ENVELOPE_KEYS) || meta[PROTOCOL_VERSION] !== MODERN) return undefined;
  const info = meta[CLIENT_INFO];
  if (info !== undefined && !(isPlainObject(info) && onlyKeys(info, CLIENT_INFO_KEYS) && Object.values(info).every((value) => typeof value === "string")))
    return undefined;
  if (!plainCapabilities(meta[CLIENT_CAPABILITIES])) return undefined;
  return { id: id as string | number, name, args: args ?? {}, envelope: meta };
}

/** A request `fastToolCall` accepted. */
export interface FastCall {
  id: string | number;
  name: string;
  args: Record<string, unknown>;
  envelope: Record<string, unknown>;
}

/** Runs an accepted call through the SDK server's own `tools/call` handler and answers as the SDK would. */
export async function serveFastToolCall(call: FastCall, context: McpServerContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  // What the SDK's context would hold for this request (its `_meta` is the envelope and nothing else); a
  // handler that comes to read more of its context must find it here too. A client that hangs up cancels
  // the call, as through the host API (one signal per connection).
  const mcpReq = {
    id: call.id,
    method: "tools/call",
    _meta: call.envelope,
    envelope: call.envelope,
    signal: connectionClosed(request),
    requestState: () => undefined,
  };
  const ctx = { mcpReq };
  const result = await toolCallHandler(context)({ params: { name: call.name, arguments: call.args } }, ctx as unknown as ServerContext);
  // The SDK's 2026-07-28 encoding of a tool result: `resultType`, and the server's identity in `_meta`.
  const meta = (result as { _meta?: Record<string, unknown> })._meta;
  const encoded = { ...result, resultType: "complete", _meta: { ...meta, [SERVER_INFO_KEY]: SERVER_INFO } };
  return reply
    .code(200)
    .header("content-type", "application/json")
    .send(Buffer.from(JSON.stringify({ result: encoded, jsonrpc: "2.0", id: call.id })));
}

const MODERN = "2026-07-28";
const PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion";
const CLIENT_INFO = "io.modelcontextprotocol/clientInfo";
const CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo";
const MESSAGE_KEYS = new Set(["jsonrpc", "id", "method", "params"]);
const PARAMS_KEYS = new Set(["name", "arguments", "_meta"]);
const ENVELOPE_KEYS = new Set([PROTOCOL_VERSION, CLIENT_INFO, CLIENT_CAPABILITIES]);
const CLIENT_INFO_KEYS = new Set(["name", "version", "title"]);
/** The client capabilities 2026-07-28 defines whose values are flags (objects of flags or empty objects). */
const CAPABILITY_KEYS = new Set(["roots", "sampling", "elicitation", "experimental", "extensions"]);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function onlyKeys(value: Record<string, unknown>, allowed: Set<string>): boolean {
  for (const key in value) if (!allowed.has(key)) return false;
  return true;
}

/**
 * Capabilities this path may ignore: known keys, each an object of objects or booleans; neither URL
 * elicitation (an approval could then be asked inside the call) nor the tasks extension.
 */
function plainCapabilities(capabilities: unknown): boolean {
  if (!isPlainObject(capabilities) || !onlyKeys(capabilities, CAPABILITY_KEYS)) return false;
  for (const key in capabilities) {
    const value = capabilities[key];
    if (!isPlainObject(value)) return false;
    for (const inner in value) if (!isPlainObject(value[inner]) && typeof value[inner] !== "boolean") return false;
  }
  const elicitation = capabilities.elicitation as Record<string, unknown> | undefined;
  const extensions = capabilities.extensions as Record<string, unknown> | undefined;
  return elicitation?.url === undefined && extensions?.[TASKS_EXTENSION] === undefined;
}

function isJson(contentType: string | undefined): boolean {
  return contentType !== undefined && /^application\/json\s*(;|$)/i.test(contentType);
}

function acceptsBoth(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes("application/json") && accept.includes("text/event-stream");
}
