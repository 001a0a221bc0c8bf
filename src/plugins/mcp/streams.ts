import { Readable } from "node:stream";
import { createMcpHandler, type AuthInfo, type McpServerFactory, type ServerEventBus } from "@modelcontextprotocol/server";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { StreamLease } from "../../http/stream-limits.js";
import { onUserChanged } from "../auth/user-admin.js";
import type { McpCaller } from "./credentials.js";
import { grantAllows } from "../host/credential-grants.js";

/**
 * The long-lived notification streams of /mcp, one kind per era, both counted against the stream caps
 * (`tether-streams`, admitted by the route before they open) and both ended when the credential stops
 * working or the server stops:
 * - 2025-11-25: the GET stream of the SDK's stateless transport (`sendToolListChanged` on its server);
 * - 2026-07-28: `subscriptions/listen`, served by the SDK's own listen router (subscription id,
 *   acknowledgement, the filter it honours, keep-alives, the graceful end), fed by an event bus that
 *   carries only this caller's device changes: the SDK's default bus is one per handler, shared by
 *   everyone, so each listen stream gets a handler of its own.
 */
export interface StreamWatch {
  caller: McpCaller;
  recheckIntervalMs: number;
  /** One of the caller's devices came, went or announced other tools. */
  onToolsChanged(): void;
  /** The credential no longer works, or the server stops: end the stream. */
  end(): void;
}

/**
 * Watches the caller's devices and credential for an open stream; returns the function that stops
 * watching and ends the stream (idempotent).
 */
export function watchStream(fastify: FastifyInstance, watch: StreamWatch): () => void {
  const { caller } = watch;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    stopWatching();
    stopUserChanges();
    clearInterval(timer);
    watch.end();
  };
  const recheck = () => {
    caller.stillValid().then(
      (valid) => valid || close(),
      (error: unknown) => fastify.log.warn({ err: error }, "mcp: credential re-check failed"),
    );
  };
  const stopWatching = fastify.tetherHost.watch(caller.userId, (topic, deviceId) => {
    if (topic === "devices" && (deviceId === undefined || grantAllows(caller.deviceIds, deviceId))) watch.onToolsChanged();
  });
  const stopUserChanges = onUserChanged(fastify.tetherAuth, (userId) => {
    if (userId === caller.userId) recheck();
  });
  const timer = setInterval(recheck, watch.recheckIntervalMs);
  timer.unref();
  return close;
}

/**
 * An event bus that hears one caller's device changes only (what `subscriptions/listen` streams carry):
 * the user's own devices, and of those only the ones the credential's grant names.
 */
function callerBus(fastify: FastifyInstance, caller: McpCaller): ServerEventBus {
  return {
    publish: () => {},
    subscribe: (listener) =>
      fastify.tetherHost.watch(caller.userId, (topic, deviceId) => {
        if (topic === "devices" && (deviceId === undefined || grantAllows(caller.deviceIds, deviceId))) listener({ kind: "tools_list_changed" });
      }),
  };
}

export interface ListenStream {
  request: FastifyRequest;
  reply: FastifyReply;
  caller: McpCaller;
  authInfo: AuthInfo;
  lease: StreamLease;
  /** The request as the SDK reads it (method, URL, headers); its body is the one Fastify parsed. */
  webRequest: Request;
  factory: McpServerFactory;
  recheckIntervalMs: number;
  /** Where open streams are kept, so that the server can end them before it stops. */
  openStreams: Set<() => void>;
}

/**
 * Serves one `subscriptions/listen` request: the SDK's handler answers it (an SSE stream, or a JSON-RPC
 * error for a bad filter), and the stream stays open until the client leaves, the credential stops
 * working (the SDK then ends it gracefully, with the empty response) or the server stops.
 */
export async function serveListen(fastify: FastifyInstance, stream: ListenStream): Promise<FastifyReply> {
  const { request, reply, caller, lease } = stream;
  const handler = createMcpHandler(stream.factory, {
    legacy: "reject",
    bus: callerBus(fastify, caller),
    onerror: (error) => fastify.log.debug({ err: error }, "mcp: listen request refused by the protocol layer"),
  });
  const left = new AbortController();
  const webRequest = new Request(stream.webRequest, { signal: left.signal });
  const response = await handler.fetch(webRequest, { authInfo: stream.authInfo, parsedBody: request.body });
  reply.code(response.status);
  for (const [name, value] of response.headers) reply.header(name, value);
  if (!response.body || !response.headers.get("content-type")?.startsWith("text/event-stream")) {
    lease.release();
    await handler.close();
    return reply.send(response.body ? Buffer.from(await response.arrayBuffer()) : undefined);
  }
  // Long-lived by design: exempt from the server's idle-socket timeout (CONNECTION_TIMEOUT_MS).
  reply.raw.setTimeout(0);
  const close = watchStream(fastify, {
    caller,
    recheckIntervalMs: stream.recheckIntervalMs,
    // The bus above already carries the caller's device changes to the stream.
    onToolsChanged: () => {},
    end: () => void handler.close().catch(() => {}),
  });
  stream.openStreams.add(close);
  // The response's close: the client left (or the stream ended), whatever became of the request's body.
  reply.raw.once("close", () => {
    stream.openStreams.delete(close);
    left.abort();
    close();
    lease.release();
  });
  reply.raw.once("pipe", () => reply.raw.flushHeaders());
  return reply.send(Readable.fromWeb(response.body as never));
}
