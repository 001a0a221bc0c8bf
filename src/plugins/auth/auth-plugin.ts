import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { toWebHeaders } from "../../http/web-headers.js";
import type { Auth } from "./create-auth.js";
import { CLIENT_IP_HEADER, INTERNAL_HEADERS, PEER_IP_HEADER } from "./internal-headers.js";
import { createRefusalCache } from "./refusal-cache.js";

export interface AuthPluginOptions {
  auth: Auth;
  /** Whether edge SSO is on (drives `tetherEdgeSsoEnabled`, e.g. the SSO button). */
  edgeSsoEnabled?: boolean;
}

export interface AuthCall {
  method: "GET" | "POST";
  /** Path under the auth base path, e.g. `/sign-in/email`. */
  path: string;
  body?: unknown;
  /**
   * Send the body as a form (`application/x-www-form-urlencoded`) instead of JSON: OAuth's token
   * endpoint accepts nothing else.
   */
  form?: boolean;
}

declare module "fastify" {
  interface FastifyInstance {
    tetherAuth: Auth;
    /**
     * Calls the auth API as an HTTP request on behalf of `request` (same client address, cookies and
     * origin, so rate limiting and every check apply), copying its cookies onto `reply`.
     */
    tetherCallAuth(request: FastifyRequest, reply: FastifyReply, call: AuthCall): Promise<Response>;
    tetherEdgeSsoEnabled(): boolean;
    /** Whether better-auth has the passkey plugin (`PASSKEYS_ENABLED=true`): pages offer passkeys then. */
    tetherPasskeysEnabled(): boolean;
  }
}

/**
 * Mounts better-auth under `/api/auth/*`. better-auth's Node adapter expects an unread body, which
 * Fastify has already parsed, so the bridge builds a Web Request from the Fastify request instead:
 * Fastify's hooks (origin guard, logging, errors) stay in the loop.
 */
export const authPlugin = fp<AuthPluginOptions>(
  async (fastify, options) => {
    const { auth } = options;
    const basePath = auth.options.basePath ?? "/api/auth";
    const baseURL = new URL(auth.options.baseURL);
    // better-auth's rate-limit refusals, answered again here while they hold (see refusal-cache.ts).
    const refusals = createRefusalCache();

    const dispatch = async (request: FastifyRequest, reply: FastifyReply, call: AuthCall): Promise<Response> => {
      const refusalKey = `${request.ip} ${call.path.split("?")[0]}`;
      const refused = refusals.answer(refusalKey);
      if (refused) {
        reply.header("retry-after", refused.headers.get("x-retry-after"));
        return refused;
      }
      const url = new URL(basePath + call.path, baseURL);
      const headers = toWebHeaders(request.headers, ["content-length", "host", ...INTERNAL_HEADERS]);
      headers.set(CLIENT_IP_HEADER, request.ip);
      headers.set(PEER_IP_HEADER, request.socket.remoteAddress ?? "");
      let body: string | undefined;
      if (call.method === "POST" && call.form) {
        body = toForm(call.body).toString();
        headers.set("content-type", "application/x-www-form-urlencoded");
      } else if (call.method === "POST") {
        body = JSON.stringify(call.body ?? {});
        headers.set("content-type", "application/json");
      }
      const response = await auth.handler(new Request(url, { method: call.method, headers, body }));
      await refusals.remember(refusalKey, response);
      const cookies = response.headers.getSetCookie();
      if (cookies.length > 0) reply.header("set-cookie", cookies);
      const retryAfter = response.headers.get("x-retry-after");
      if (response.status === 429 && retryAfter) reply.header("retry-after", retryAfter);
      return response;
    };

    fastify.decorate("tetherAuth", auth);
    fastify.decorate("tetherCallAuth", dispatch);
    fastify.decorate("tetherEdgeSsoEnabled", () => options.edgeSsoEnabled === true);
    const passkeys = (auth.options.plugins ?? []).some((plugin) => plugin.id === "passkey");
    fastify.decorate("tetherPasskeysEnabled", () => passkeys);

    fastify.route({
      method: ["GET", "POST"],
      url: `${basePath}/*`,
      handler: async (request, reply) => {
        const path = request.url.slice(basePath.length);
        const response = await dispatch(request, reply, {
          method: request.method as "GET" | "POST",
          path,
          body: request.body,
          form: request.headers["content-type"]?.startsWith("application/x-www-form-urlencoded") === true,
        });
        if (response.status === 404 && !response.body) {
          // No such auth endpoint (or not for this method): the app's own not-found answer, not an empty 404.
          return reply.callNotFound();
        }
        reply.code(response.status);
        for (const [name, value] of response.headers) {
          if (name !== "set-cookie" && name !== "content-length") reply.header(name, value);
        }
        return reply.send(response.body ? Buffer.from(await response.arrayBuffer()) : undefined);
      },
    });
  },
  { name: "tether-auth", fastify: "5.x", dependencies: ["tether-errors", "tether-origin-guard"] },
);

/** A parsed form body back as a form; a repeated field (an array) stays repeated. */
function toForm(body: unknown): URLSearchParams {
  const form = new URLSearchParams();
  for (const [name, value] of Object.entries((body ?? {}) as Record<string, unknown>)) {
    for (const item of Array.isArray(value) ? value : [value]) if (item !== undefined && item !== null) form.append(name, String(item));
  }
  return form;
}
