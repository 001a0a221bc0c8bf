/**
 * `tether/http`: the HTTP edge every Tether plugin shares: the one error handler and its typed errors
 * (`{ code, message }` for APIs, a rendered page for browsers; `frameworkErrorHandler` goes into
 * `Fastify({ frameworkErrors })` so Fastify's own errors answer the same way), the page helpers `redirectTo` and
 * `isHtmxRequest`, and the one admission for long-lived streams (`streamLimitsPlugin`, `fastify.tetherStreams`).
 */
export { errorHandlerPlugin, frameworkErrorHandler, redirectTo, type ErrorBody, type ErrorPageRenderer } from "./error-handler.js";
export { badRequest, ForbiddenError, HttpError, LoginRequiredError, notFound, unauthorized } from "./errors.js";
export { isHtmxRequest } from "./htmx.js";
export { streamLimitsPlugin, type StreamHolder, type StreamKind, type StreamLease, type StreamLimiter, type StreamLimitsOptions } from "./stream-limits.js";
