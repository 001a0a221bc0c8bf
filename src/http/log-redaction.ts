/**
 * Secrets never reach the log. A password-reset token in an access-log URL resets the password of
 * whoever reads the log, so the request serializer writes URLs with secrets replaced, and pino's
 * `redact` censors credential headers and fields wherever a log call includes them.
 *
 * Redacted in URLs:
 * - the value of every query parameter named in `SECRET_QUERY_PARAMETERS` (any letter case);
 * - the path segment after one named in `SECRET_PATH_PREFIXES` (`/api/auth/reset-password/<token>`);
 * - any path segment that is a bearer credential (`sk_…` API tokens, `dt_…` device tokens).
 */
import type { FastifyRequest, FastifyServerOptions } from "fastify";

export const REDACTED = "[redacted]";

/** Query parameters that carry a credential, a one-time code or an OAuth/device-flow secret. */
export const SECRET_QUERY_PARAMETERS: ReadonlySet<string> = new Set([
  "token",
  "code",
  "user_code",
  "device_code",
  "state",
  "password",
  "newpassword",
  "secret",
  "client_secret",
  "access_token",
  "refresh_token",
  "id_token",
  "api_key",
  "apikey",
  "otp",
  "ticket",
  "signature",
  "sig",
]);

/** Path segments followed by a secret: better-auth's reset link, and its email-verification and magic links. */
export const SECRET_PATH_PREFIXES: ReadonlySet<string> = new Set(["reset-password", "verify-email", "magic-link"]);

const BEARER_SEGMENT = /^(sk|dt)_/;

/** `url` (path and query, as in a request line) with its secrets replaced by `[redacted]`. */
export function redactUrl(url: string): string {
  const queryStart = url.indexOf("?");
  const path = queryStart === -1 ? url : url.slice(0, queryStart);
  const segments = path.split("/");
  for (let i = 0; i < segments.length; i++) {
    const previous = segments[i - 1]?.toLowerCase();
    if ((previous !== undefined && SECRET_PATH_PREFIXES.has(previous) && segments[i] !== "") || BEARER_SEGMENT.test(segments[i]!)) {
      segments[i] = REDACTED;
    }
  }
  if (queryStart === -1) return segments.join("/");
  const query = url
    .slice(queryStart + 1)
    .split("&")
    .map((pair) => {
      const eq = pair.indexOf("=");
      if (eq === -1) return pair;
      return SECRET_QUERY_PARAMETERS.has(safeDecode(pair.slice(0, eq)).toLowerCase()) ? `${pair.slice(0, eq)}=${REDACTED}` : pair;
    })
    .join("&");
  return `${segments.join("/")}?${query}`;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replaceAll("+", " "));
  } catch {
    return text;
  }
}

/** Fastify's own request serializer (the same fields), with the URL redacted. */
export function serializeRequest(request: FastifyRequest) {
  return {
    method: request.method,
    url: redactUrl(request.url),
    version: request.headers?.["accept-version"],
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

/** Wherever a log call includes headers or a body, these paths are censored (pino `redact`). */
export const REDACTED_LOG_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  "req.headers['x-edge-secret']",
  "res.headers['set-cookie']",
  "headers.authorization",
  "headers.cookie",
  "headers['set-cookie']",
  "*.password",
  "*.newPassword",
  "*.currentPassword",
  "*.token",
];

/**
 * The app's logger options with the redacting serializer and paths added. `true` means Fastify's
 * default logger; `false`/undefined stays off. An app passing its own `loggerInstance` configures
 * redaction there (see README, "Production checklist").
 */
export function withLogRedaction(logger: FastifyServerOptions["logger"]): FastifyServerOptions["logger"] {
  if (!logger) return false;
  const base = logger === true ? {} : logger;
  return {
    ...base,
    serializers: { ...base.serializers, req: serializeRequest as never },
    redact: { paths: REDACTED_LOG_PATHS, censor: REDACTED },
  };
}
