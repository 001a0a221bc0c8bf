import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { redirectTo } from "../../http/error-handler.js";
import { optionalText, readAuthFailure } from "../forms.js";
import { wantsFragment } from "../render.js";
import { RETURN_PARAM, RETURN_PATH_MAX_LENGTH, safeReturnPath } from "../return-path.js";

export const TWO_FACTOR_LOGIN_PATH = "/login/two-factor";
const CodeBody = Type.Object({ code: optionalText(40), method: optionalText(10), next: optionalText(RETURN_PATH_MAX_LENGTH) });
const MethodQuery = Type.Object({ method: optionalText(10), next: optionalText(RETURN_PATH_MAX_LENGTH) });
type Method = "totp" | "backup";

/** The endpoint that checks each kind of code, and how the form asks for it. */
const METHODS: Record<Method, { path: string; label: string; pattern: RegExp; hint: string }> = {
  totp: { path: "/two-factor/verify-totp", label: "Code from your authenticator app", pattern: /^\d{6}$/, hint: "Enter the 6-digit code your app shows." },
  backup: { path: "/two-factor/verify-backup-code", label: "Backup code", pattern: /^[A-Za-z0-9-]{4,40}$/, hint: "Enter one of the backup codes you saved." },
};
const methodOf = (value: string | undefined): Method => (value === "backup" ? "backup" : "totp");

/** Where the user home after sign-in: passed in, so this plugin does not import the auth pages. */
export interface TwoFactorLoginOptions {
  homePath: string;
}

/**
 * The second step of signing in with two-factor on: after the password, better-auth answers
 * `twoFactorRedirect` and sets its short-lived `two_factor` cookie instead of a session; this page
 * takes the authenticator code (or a backup code) and hands it to better-auth, which then creates
 * the session. Registered inside the guest-only pages (signed-in visitors are sent home).
 */
export const twoFactorLogin: FastifyPluginAsyncTypebox<TwoFactorLoginOptions> = async (fastify, options) => {
  const show = (request: FastifyRequest, reply: FastifyReply, method: Method, next: string | undefined, error?: string) =>
    reply.tetherRender(wantsFragment(request) ? "auth/two-factor-form" : "auth/two-factor", {
      title: "Two-factor authentication",
      method,
      field: METHODS[method],
      error,
      // The page that asked for the sign-in, carried through this step (return-path.ts).
      next,
      nextQuery: next ? `&${RETURN_PARAM}=${encodeURIComponent(next)}` : "",
    });

  fastify.get(TWO_FACTOR_LOGIN_PATH, { schema: { querystring: MethodQuery } }, async (request, reply) =>
    show(request, reply, methodOf(request.query.method), safeReturnPath(request.query.next)),
  );

  fastify.post(TWO_FACTOR_LOGIN_PATH, { schema: { body: CodeBody } }, async (request, reply) => {
    const method = methodOf(request.body.method);
    const next = safeReturnPath(request.body.next);
    const code = (request.body.code ?? "").replace(/\s+/g, "");
    if (!METHODS[method].pattern.test(code)) return show(request, reply.code(400), method, next, METHODS[method].hint);
    const response = await fastify.tetherCallAuth(request, reply, { method: "POST", path: METHODS[method].path, body: { code } });
    if (response.ok) return redirectTo(request, reply, next ?? options.homePath);
    const failure = await readAuthFailure(response, "The code could not be checked");
    // No challenge (expired, used up, or never started): the password step starts again.
    if (failure.code === "INVALID_TWO_FACTOR_COOKIE" || failure.code === "TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE") {
      return redirectTo(request, reply, `/login?reset=two-factor${next ? `&${RETURN_PARAM}=${encodeURIComponent(next)}` : ""}`);
    }
    const message = failure.code === "INVALID_CODE" || failure.code === "INVALID_BACKUP_CODE" ? "That code is not correct. Try again." : failure.message;
    return show(request, reply.code(failure.status), method, next, message);
  });
};
