import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { isDatabaseUnavailable } from "../db/unavailable.js";
import { ForbiddenError, HttpError, LoginRequiredError } from "./errors.js";
import { isHtmxRequest } from "./htmx.js";
import { describeWholeNumberPattern } from "./whole-number.js";

export interface ErrorBody {
  statusCode: number;
  code: string;
  message: string;
}

/** Renders an error as a page; the pages plugin provides one. Without it every error is JSON. */
export type ErrorPageRenderer = (request: FastifyRequest, reply: FastifyReply, error: ErrorBody) => FastifyReply | Promise<FastifyReply>;

declare module "fastify" {
  interface FastifyInstance {
    /** Set by a pages plugin so browser requests get a rendered page instead of JSON. */
    tetherErrorPages: ErrorPageRenderer | null;
  }
}

/** True for a browser navigation or htmx request outside the JSON API. */
export function wantsHtml(request: FastifyRequest): boolean {
  if (request.url.startsWith("/api/")) return false;
  if (isHtmxRequest(request)) return true;
  return (request.headers.accept ?? "").includes("text/html");
}

/** Sends the browser (or htmx, which follows `HX-Redirect` itself) to `location`. */
export function redirectTo(request: FastifyRequest, reply: FastifyReply, location: string, status = 303): FastifyReply {
  if (isHtmxRequest(request)) {
    return reply.code(200).header("hx-redirect", location).send();
  }
  return reply.redirect(location, status);
}

/**
 * The one error handler: typed errors to responses, framework errors to clear 4xx, and anything
 * unexpected to a 500 whose body says nothing about internals (the log has the stack).
 */
export const errorHandlerPlugin = fp(
  async (fastify) => {
    fastify.decorate("tetherErrorPages", null);

    fastify.setErrorHandler(async (error: FastifyError | Error, request, reply) => {
      if (error instanceof LoginRequiredError) {
        return redirectTo(request, reply, error.location, 302);
      }
      if (error instanceof ForbiddenError && !wantsHtml(request)) {
        return reply.code(403).type("text/plain; charset=utf-8").send("Forbidden");
      }
      const body = describeError(error);
      if (body.statusCode === 503) {
        // An outage, not a bug: one line, no stack; the request can simply be tried again.
        request.log.warn({ code: body.code, reason: error.message }, "request failed: service unavailable");
        // A refusal that knows better (how long until streams free up) has set its own.
        if (!reply.hasHeader("retry-after")) reply.header("retry-after", String(RETRY_AFTER_SECONDS));
      } else if (body.statusCode >= 500) request.log.error({ err: error }, "request failed");
      reply.code(body.statusCode);
      const renderer = fastify.tetherErrorPages;
      if (renderer && wantsHtml(request)) return renderer(request, reply, body);
      return reply.send({ code: body.code, message: body.message });
    });

    fastify.setNotFoundHandler(async (request, reply) => {
      const body = { statusCode: 404, code: "NOT_FOUND", message: `No route for ${request.method} ${request.url.split("?")[0]}` };
      reply.code(404);
      const renderer = fastify.tetherErrorPages;
      if (renderer && wantsHtml(request)) return renderer(request, reply, body);
      return reply.send({ code: body.code, message: body.message });
    });
  },
  { name: "tether-errors", fastify: "5.x" },
);

/**
 * Fastify's `frameworkErrors` option: errors raised before routing (a malformed URL, a path
 * parameter over `maxParamLength`) answer in the same `{ code, message }` shape as everything else.
 * No hook runs for them, so the one header a JSON body needs is set here.
 */
export function frameworkErrorHandler(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const body = describeError(error);
  reply.code(body.statusCode).header("x-content-type-options", "nosniff").send({ code: body.code, message: body.message });
}

/** What a 503 suggests to clients: outages we answer 503 for (database, Redis) are usually short. */
const RETRY_AFTER_SECONDS = 5;

/** The status, code and message any error answers with (the one mapping, for handlers that must know it before replying). */
export function describeError(error: FastifyError | Error): ErrorBody {
  if (error instanceof HttpError) return { statusCode: error.statusCode, code: error.code, message: error.message };
  if (error instanceof ForbiddenError) return { statusCode: 403, code: "FORBIDDEN", message: "Forbidden" };
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    return { statusCode: 400, code: "INVALID_INPUT", message: validationMessage(fastifyError) };
  }
  const status = fastifyError.statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) {
    return { statusCode: status, code: clientErrorCode(fastifyError), message: clientErrorMessage(fastifyError) };
  }
  if (isDatabaseUnavailable(error)) {
    return { statusCode: 503, code: "DATABASE_UNAVAILABLE", message: "The database is unavailable right now; try again in a moment" };
  }
  return { statusCode: 500, code: "INTERNAL", message: "Something went wrong on our side; it has been logged" };
}

function validationMessage(error: FastifyError): string {
  const first = error.validation?.[0];
  if (!first) return error.message;
  const where = error.validationContext ?? "input";
  const field = first.instancePath ? first.instancePath.slice(1).replaceAll("/", ".") : (first.params as { missingProperty?: string }).missingProperty;
  if (first.keyword === "required") return `${where}: missing field "${(first.params as { missingProperty: string }).missingProperty}"`;
  if (first.keyword === "additionalProperties") {
    return `${where}: unknown field "${(first.params as { additionalProperty: string }).additionalProperty}"`;
  }
  // Ajv's and the strict validator's pattern errors both name the pattern; a whole-number range says so in words.
  const message = (first.keyword === "pattern" && describeWholeNumberPattern(first.params?.pattern)) || first.message || "is invalid";
  return field ? `${where}: "${field}" ${message}` : `${where} ${message}`;
}

const FRAMEWORK_CODES: Record<string, string> = {
  FST_ERR_CTP_BODY_TOO_LARGE: "BODY_TOO_LARGE",
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "UNSUPPORTED_MEDIA_TYPE",
  FST_ERR_CTP_EMPTY_JSON_BODY: "INVALID_JSON",
  FST_ERR_CTP_INVALID_JSON_BODY: "INVALID_JSON",
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: "INVALID_CONTENT_LENGTH",
  FST_ERR_BAD_URL: "BAD_URL",
};

function clientErrorCode(error: FastifyError): string {
  if (error.code && FRAMEWORK_CODES[error.code]) return FRAMEWORK_CODES[error.code]!;
  if (error instanceof SyntaxError) return "INVALID_JSON";
  return error.code && /^[A-Z_]+$/.test(error.code) && !error.code.startsWith("FST_") ? error.code : "BAD_REQUEST";
}

function clientErrorMessage(error: FastifyError): string {
  if (error.code === "FST_ERR_CTP_BODY_TOO_LARGE") return "Request body is too large";
  if (error instanceof SyntaxError || error.code === "FST_ERR_CTP_INVALID_JSON_BODY") return "Request body is not valid JSON";
  return error.message;
}
