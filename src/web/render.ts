import { Eta } from "eta";
import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import type { UiUser } from "../plugins/session/session-plugin.js";
import type { AssetUrls } from "./assets.js";
import { VIEWS_DIR } from "./locations.js";
import { isHtmxRequest } from "../http/htmx.js";

export interface RenderPluginOptions {
  /** Directory of the Eta templates; `src/views` by default. */
  viewsDir?: string;
}

/** What every template sees besides the handler's own data. */
export interface PageLocals {
  /** The signed-in user inside the guarded area (and on error pages when known), else null. */
  user: UiUser | null;
  assets: AssetUrls;
  /** The request path, for marking the current navigation link. */
  path: string;
  /** JSON for `<meta name="htmx-config">`. */
  htmxConfig: string;
  format: typeof format;
  /** Counts the navigation shows (changes waiting for approval), when the app counts them; else null. */
  navCounts: NavCounts | null;
}

export interface NavCounts {
  pendingChanges: number;
}

declare module "fastify" {
  interface FastifyRequest {
    /** Set inside the guarded context by `navCounts` (home-page.ts) for whole pages. */
    tetherNavCounts: NavCounts | null;
  }
  interface FastifyReply {
    /**
     * Sends `src/views/<template>.eta` as HTML with the status set by `reply.code()` (200 otherwise).
     * A template that starts with `<% layout("/layout") %>` is a whole page; one without is a
     * fragment for an htmx swap. Templates see `it.user`, `it.assets`, `it.path` and `it.format`
     * besides `data` (which wins on a clash). Pages are per user, so they are sent `no-store`.
     */
    tetherRender(template: string, data?: Record<string, unknown>): FastifyReply;
  }
}

/**
 * htmx 4 configuration, read from a meta tag because the CSP forbids inline script.
 * - `noSwap: [204, 304]` (htmx 4's default, written out because it is a decision): 4xx and 5xx
 *   bodies ARE swapped. A form that fails validation answers 4xx with the form itself, errors
 *   included; every other error answers with a whole error page that retargets `body`.
 * - `history: false`: every page is a real URL loaded in full; htmx only swaps parts of a page, so
 *   it has no history entries to restore (and the back button never resurrects a swapped fragment).
 * - `includeIndicatorCSS: false`: htmx would inject a stylesheet; ours styles `.htmx-request`.
 * - `defaultSettleDelay: 0`: no settle phase. We animate nothing, and settling copies the old
 *   element's `style` attribute onto its replacement (browser extensions and automation set one),
 *   which the CSP refuses as inline style.
 */
export const HTMX_CONFIG = JSON.stringify({
  noSwap: [204, 304],
  history: false,
  includeIndicatorCSS: false,
  defaultTimeout: 20_000,
  defaultSettleDelay: 0,
});

const dateFormat = new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeZone: "UTC" });
const dateTimeFormat = new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" });

/** Formatting helpers for templates (`it.format.date(d)`); dates are shown in UTC. */
export const format = {
  date: (value: Date | string | null | undefined, empty = "—") => (value ? dateFormat.format(new Date(value)) : empty),
  dateTime: (value: Date | string | null | undefined, empty = "—") => (value ? `${dateTimeFormat.format(new Date(value))} UTC` : empty),
};

export { isHtmxRequest };

/**
 * True when the answer should be a fragment rather than a whole page: an htmx request that targets
 * part of the page (htmx 4 says `HX-Request-Type: full` when it targets the body).
 */
export function wantsFragment(request: FastifyRequest): boolean {
  return isHtmxRequest(request) && request.headers["hx-request-type"] !== "full";
}

/** `reply.tetherRender`: Eta templates with autoescaping, compiled once and cached. */
export const renderPlugin = fp<RenderPluginOptions>(
  async (fastify, options) => {
    const eta = new Eta({ views: options.viewsDir ?? VIEWS_DIR, cache: true, autoEscape: true });
    const assets = fastify.tetherAssets;
    fastify.decorateRequest("tetherNavCounts", null);

    fastify.decorateReply("tetherRender", function tetherRender(this: FastifyReply, template: string, data: Record<string, unknown> = {}) {
      const request = this.request;
      const locals: PageLocals = {
        user: request.tetherUser ?? null,
        assets,
        path: request.url.split("?")[0] ?? "/",
        htmxConfig: HTMX_CONFIG,
        format,
        navCounts: request.tetherNavCounts ?? null,
      };
      const html = eta.render(template, { ...locals, ...data });
      if (!this.hasHeader("cache-control")) this.header("cache-control", "no-store");
      return this.type("text/html; charset=utf-8").send(html);
    });
  },
  { name: "tether-page-render", fastify: "5.x", dependencies: ["tether-page-assets"] },
);
