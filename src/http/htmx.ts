import type { FastifyRequest } from "fastify";

/** True for a request made by htmx (it sends `HX-Request: true`); the one check, for errors and pages alike. */
export function isHtmxRequest(request: FastifyRequest): boolean {
  return request.headers["hx-request"] === "true";
}
