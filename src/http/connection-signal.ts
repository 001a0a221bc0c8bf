import { setMaxListeners } from "node:events";
import type { Socket } from "node:net";
import type { FastifyRequest } from "fastify";

const signals = new WeakMap<Socket, AbortSignal>();

/**
 * A signal that aborts when the request's client connection closes: the client hung up, so whatever
 * the request is waiting for can stop (a tool call tells its device to cancel).
 *
 * One signal per connection, shared by the requests a keep-alive connection carries one after
 * another: a new `AbortController` per request cost about 10 µs of a tool call's CPU on Node 20
 * (profiled at ten connections), the largest cost of Node's own on that path. A waiter that finishes
 * removes its listener, so a later close reaches only the requests still waiting on it.
 */
export function connectionClosed(request: FastifyRequest): AbortSignal {
  const socket = request.raw.socket;
  if (socket === null || socket.destroyed) return AbortSignal.abort();
  let signal = signals.get(socket);
  if (signal === undefined) {
    const controller = new AbortController();
    // Each request still waiting holds one listener; a client pipelining requests may have more than
    // Node's default of ten waiting at once, which is no leak (each is removed when its request ends).
    setMaxListeners(0, controller.signal);
    socket.once("close", () => controller.abort());
    signal = controller.signal;
    signals.set(socket, signal);
  }
  return signal;
}
