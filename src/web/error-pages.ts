import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import type { ErrorBody } from "../http/error-handler.js";
import { originOf } from "../http/origins.js";
import type { UiUser } from "../plugins/session/session-plugin.js";
import { isHtmxRequest } from "./render.js";

/** What the error page says, by status. The message of a 4xx is the error's own; a 5xx says nothing internal. */
export interface ErrorPage {
  status: number;
  heading: string;
  message: string;
  hint?: string;
  /** Where to go next, when the page knows better than home or sign-in (the site's own address). */
  link?: { href: string; text: string };
}

/** What an error page may know about the request besides the error: the site's address, where the form came from. */
export interface ErrorContext {
  retryAfterSeconds?: number | undefined;
  /** The site's configured address (`BETTER_AUTH_URL`). */
  baseURL?: string | undefined;
  /** The origin the refused form was sent from (its Origin, else its Referer's). */
  sentFrom?: string | undefined;
}

export function describeErrorPage(error: ErrorBody, context: ErrorContext = {}): ErrorPage {
  const { statusCode: status, code, message } = error;
  const retryAfterSeconds = context.retryAfterSeconds;
  if (status === 403) {
    if (code === "INVALID_ORIGIN" || code === "MISSING_ORIGIN") return refusedOrigin(context);
  }
  if (status === 403) {
    return {
      status,
      heading: "Forbidden",
      message: message && message !== "Forbidden" ? message : "You do not have access to this page.",
      hint: "Ask a site admin if you think you should.",
    };
  }
  if (status === 404) {
    // The not-found handler's own message names the route; a handler's (e.g. "No such token") helps.
    const generic = message.startsWith("No route for ") || message === "Not found";
    return { status, heading: generic ? "Page not found" : "Not found", message: generic ? "There is nothing at this address." : message };
  }
  if (status === 429) {
    const wait = retryAfterSeconds ? `Wait ${retryAfterSeconds} seconds` : "Wait a minute";
    return { status, heading: "Too many attempts", message: `${wait}, then try again.` };
  }
  if (status === 503) {
    return { status, heading: "Temporarily unavailable", message: "The service cannot reach what it needs right now. Try again in a moment." };
  }
  if (status >= 500) {
    return { status, heading: "Something went wrong", message: "Something went wrong on our side. It has been logged; please try again." };
  }
  return { status, heading: status === 400 ? "That request could not be handled" : "Request refused", message };
}

/**
 * A form refused by the origin check. Usually the page was opened at another address of this site (an IP
 * for a name, 127.0.0.1 for localhost): the page names the address to use, as a link.
 */
function refusedOrigin(context: ErrorContext): ErrorPage {
  const base = context.baseURL ? originOf(context.baseURL) : undefined;
  const from = context.sentFrom && context.sentFrom !== base ? ` (${context.sentFrom})` : "";
  return {
    status: 403,
    heading: "Forbidden",
    message: `This form was sent from a page that is not part of this site${from}, so it was refused.`,
    hint: base
      ? `This site's address is ${base}. Open it there, sign in if asked, and send the form again.`
      : "If you sent it yourself, go back, reload the page and try again.",
    ...(base ? { link: { href: `${base}/home`, text: `Open ${base}` } } : {}),
  };
}

/** The origin a state-changing request says it came from: its Origin, or its Referer's. */
function sentFromOf(request: FastifyRequest): string | undefined {
  const origin = request.headers.origin;
  if (origin !== undefined) return originOf(origin);
  const referer = request.headers.referer;
  return referer === undefined ? undefined : originOf(referer);
}

/** The user for the layout of an error page, when the request got far enough to know it. */
async function knownUser(request: FastifyRequest): Promise<UiUser | null> {
  if (request.tetherUser) return request.tetherUser;
  // An error raised before the session plugin's hook (e.g. the origin guard) leaves no resolver.
  if (typeof request.fetchSession !== "function") return null;
  try {
    return (await request.fetchSession())?.user ?? null;
  } catch {
    return null; // the page must render even when the database is what failed
  }
}

/**
 * Fills the error handler's `tetherErrorPages`: browsers get a page (403, 404, 400 with its
 * message, 429, 500) while `/api/*` stays JSON (the handler only asks for HTML elsewhere).
 * For an htmx request the page replaces the whole body (`HX-Retarget: body`): the user sees what a
 * browser without JavaScript would see, never an error page squeezed into a table row.
 */
export const errorPagesPlugin = fp<{ baseURL?: string }>(
  async (fastify, options) => {
    fastify.tetherErrorPages = async (request: FastifyRequest, reply: FastifyReply, error: ErrorBody) => {
      const retryAfterSeconds = Number(reply.getHeader("retry-after")) || undefined;
      const page = describeErrorPage(error, { retryAfterSeconds, baseURL: options.baseURL, sentFrom: sentFromOf(request) });
      reply.code(page.status).header("cache-control", "no-store");
      if (isHtmxRequest(request)) reply.header("hx-retarget", "body").header("hx-reswap", "innerHTML show:top");
      const user = await knownUser(request);
      try {
        return reply.tetherRender("error", { title: page.heading, page, user });
      } catch (renderError) {
        request.log.error({ err: renderError }, "error page failed to render");
        return reply.type("text/plain; charset=utf-8").send(`${page.heading}\n\n${page.message}\n`);
      }
    };
  },
  { name: "tether-error-pages", fastify: "5.x", dependencies: ["tether-errors", "tether-page-render"] },
);
