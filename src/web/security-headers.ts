import fp from "fastify-plugin";

export interface SecurityHeadersOptions {
  /** The site is served over https: browsers are told to keep it that way (HSTS). */
  https: boolean;
}

/**
 * No inline script or style anywhere: scripts and the stylesheet come from our origin only, htmx
 * reads its configuration from a `<meta>` tag, and forms may only post back to us.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

/**
 * An http(s) URL's origin as a CSP source expression, or undefined when it is anything else. Only a
 * scheme, a host name of letters, digits, dots and hyphens (or a bracketed IPv6 address) and a port
 * pass: the URL parser accepts hosts such as `x;sandbox`, which in a header would end the directive
 * and start another.
 */
export function cspSourceOf(url: string): string | undefined {
  let origin: string;
  try {
    origin = new URL(url).origin;
  } catch {
    return undefined;
  }
  return /^https?:\/\/(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?$/i.test(origin) ? origin : undefined;
}

/** The policy with `form-action` widened to these URLs' origins; URLs that are not plain http(s) origins are left out. */
export function policyWithFormActions(urls: readonly string[]): string {
  const sources = [...new Set(urls.map(cspSourceOf).filter((source): source is string => source !== undefined))];
  return sources.length === 0 ? CONTENT_SECURITY_POLICY : CONTENT_SECURITY_POLICY.replace("form-action 'self'", ["form-action 'self'", ...sources].join(" "));
}

/**
 * Security headers on every response (pages, errors, assets, the JSON API). A route may set its own
 * value for any of them first; this hook fills in only what is missing.
 */
export const securityHeadersPlugin = fp<SecurityHeadersOptions>(
  async (fastify, options) => {
    const headers: Record<string, string> = {
      "content-security-policy": CONTENT_SECURITY_POLICY,
      "x-content-type-options": "nosniff",
      // Same-origin requests keep their Referer (the origin guard's fallback when Origin is absent);
      // other sites learn nothing about where their visitors came from.
      "referrer-policy": "same-origin",
      "x-frame-options": "DENY",
      "cross-origin-opener-policy": "same-origin",
      "cross-origin-resource-policy": "same-origin",
      "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
    };
    if (options.https) headers["strict-transport-security"] = "max-age=31536000";

    const entries = Object.entries(headers);
    // A callback hook (every response passes here; an async one costs a promise and a microtask turn).
    fastify.addHook("onSend", (_request, reply, payload, done) => {
      for (const [name, value] of entries) {
        if (!reply.hasHeader(name)) reply.header(name, value);
      }
      done(null, payload);
    });
  },
  { name: "tether-security-headers", fastify: "5.x" },
);
