import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { Test } from "tap";

/** The revisions a test can pin the official TypeScript SDK v2 client to. */
export type Revision = "2026-07-28" | "2025-11-25";

/**
 * The official TypeScript SDK v2 client over Streamable HTTP with a bearer token, closed at the end of
 * `t`: at 2026-07-28 (pinned: `server/discover`, no fallback) or at 2025-11-25 (the `initialize`
 * handshake, the SDK's default). `capabilities` are the client's own (e.g. URL-mode elicitation).
 */
export async function connectV2(t: Test, url: string, token: string, revision: Revision, capabilities: Record<string, unknown> = {}): Promise<Client> {
  const modern = revision === "2026-07-28";
  const client = new Client(
    { name: "tether-test-v2", version: "1.0.0" },
    {
      capabilities,
      ...(modern ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {}),
    },
  );
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", url), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  t.teardown(() => client.close());
  return client;
}

/** The per-request `_meta` envelope of a hand-written 2026-07-28 request. */
export function envelope(capabilities: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
    "io.modelcontextprotocol/clientCapabilities": capabilities,
  };
}

/** POSTs one JSON-RPC message to `<url>/mcp` with a bearer token, the JSON body and the `Accept` MCP asks for, plus `headers`. */
export function postMcp(
  url: string,
  bearer: string,
  headers: Record<string, string>,
  message: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(message),
    ...(signal ? { signal } : {}),
  });
}

/** POSTs one hand-written 2026-07-28 request (with the standard headers unless `headers` replaces them; `params._meta` replaces the default envelope). */
export async function rawModern(
  url: string,
  token: string,
  method: string,
  params: Record<string, unknown>,
  headers?: Record<string, string>,
): Promise<Response> {
  const name: Record<string, string> = typeof params.name === "string" ? { "mcp-name": params.name } : {};
  return postMcp(url, token, headers ?? { "mcp-protocol-version": "2026-07-28", "mcp-method": method, ...name }, {
    jsonrpc: "2.0",
    id: 1,
    method,
    params: { _meta: envelope(), ...params },
  });
}

/** One raw 2026-07-28 `tools/call` of write_file from a client that declares URL-mode elicitation; its JSON-RPC answer. */
export async function rawWriteFileCall(url: string, bearer: string, args: Record<string, unknown>, params: Record<string, unknown> = {}): Promise<any> {
  const response = await rawModern(url, bearer, "tools/call", {
    name: "write_file",
    arguments: args,
    ...params,
    _meta: envelope({ elicitation: { url: {} } }),
  });
  return response.json();
}

/** One raw 2025-11-25 `tools/call` of write_file (no initialize: Tether serves that revision statelessly), with a session id if given; its JSON-RPC answer. */
export async function rawLegacyWriteFileCall(url: string, bearer: string, args: Record<string, unknown>, sessionId?: string): Promise<any> {
  const response = await postMcp(
    url,
    bearer,
    { "mcp-protocol-version": "2025-11-25", ...(sessionId ? { "mcp-session-id": sessionId } : {}) },
    { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "write_file", arguments: args } },
  );
  return response.json();
}

let framedId = 0;
/**
 * One 2026-07-28 request already framed by a client (the tasks client's `rawDispatch`: `_meta` in place), POSTed
 * to `at` with the standard headers (the task id in `Mcp-Name` for `tasks/*`); its result or its error.
 */
export async function dispatchFramed(
  at: string,
  bearer: string,
  request: Record<string, any>,
  signal?: AbortSignal,
): Promise<{ kind: "result"; result: any } | { kind: "error"; error: any }> {
  const params = request.params ?? {};
  const name = (request.method === "tools/call" ? params.name : params.taskId) as string | undefined;
  const headers = { "mcp-protocol-version": "2026-07-28", "mcp-method": String(request.method), ...(name ? { "mcp-name": name } : {}) };
  const response = await postMcp(at, bearer, headers, { jsonrpc: "2.0", id: ++framedId, ...request }, signal);
  const body = (await response.json()) as { result?: unknown; error?: unknown };
  return body.error ? { kind: "error", error: body.error } : { kind: "result", result: body.result };
}
