import type { FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { originOf } from "../../http/origins.js";
import { HttpError } from "../../http/errors.js";

export interface OriginGuardOptions {
  /** Trusted origins: `trustedOriginList(baseURL, TRUSTED_ORIGINS)`, the list better-auth gets too. */
  trustedOrigins: string[];
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export type OriginVerdict = "trusted" | "script" | "untrusted" | "missing";

/**
 * The one place Tether checks origins (CSRF defence for the auth API, the pages and the JSON APIs).
 * A state-changing request passes when its Origin (or, without one, its Referer) is trusted, or when
 * it carries neither and no cookie: a script or device has no ambient credential to abuse.
 */
export function judgeOrigin(request: FastifyRequest, trusted: ReadonlySet<string>): OriginVerdict {
  const origin = request.headers.origin;
  if (origin !== undefined) return trusted.has(origin) ? "trusted" : "untrusted";
  const referer = request.headers.referer;
  if (referer !== undefined) {
    const refererOrigin = originOf(referer);
    return refererOrigin !== undefined && trusted.has(refererOrigin) ? "trusted" : "untrusted";
  }
  return request.headers.cookie ? "missing" : "script";
}

export const originGuardPlugin = fp<OriginGuardOptions>(
  async (fastify, options) => {
    const trusted = new Set(options.trustedOrigins.map((o) => originOf(o) ?? o));
    // A callback hook, not an async one: it runs on every request and never waits, and an async hook
    // costs a promise and a microtask turn per request.
    fastify.addHook("onRequest", (request, _reply, done) => {
      if (SAFE_METHODS.has(request.method)) return done();
      const verdict = judgeOrigin(request, trusted);
      if (verdict === "untrusted") return done(new HttpError(403, "INVALID_ORIGIN", "This request came from an origin that is not trusted"));
      if (verdict === "missing")
        return done(new HttpError(403, "MISSING_ORIGIN", "A request carrying cookies must say where it comes from (Origin or Referer)"));
      done();
    });
  },
  { name: "tether-origin-guard", fastify: "5.x", dependencies: ["tether-errors"] },
);
