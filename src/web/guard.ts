/**
 * The route guard: one encapsulated Fastify context holding every signed-in page, so that a page added
 * to it inherits the guard (the rule: every signed-in page sits in one guarded subtree, and nothing
 * protected runs before the guard has found a session).
 *
 * Its `onRequest` hook runs before every other hook and handler of the context (after the app's own
 * root hooks: origin guard, cookies, session binding; before the body is even parsed). It calls
 * `request.fetchSession()`, which answers for a browser's cookie session only (an API token, scoped or
 * not, never opens a page); with no such session it redirects to `/login` (302, or `HX-Redirect`
 * for htmx) and no protected handler runs; otherwise it sets `request.tetherUser` (the UI-safe user) for
 * the routes inside, and marks the response `Cache-Control: no-store` so the back button after
 * sign-out never shows a cached protected page.
 *
 * ## Adding a page (API for other plugins)
 *
 * Write an ordinary Fastify plugin and hand it to `guardedPagesPlugin` in `pages`; the app does:
 *
 *     await app.register(guardedPagesPlugin, { pages: [devicePages] });
 *
 *     // devices/pages.ts
 *     export const devicePages: FastifyPluginAsync = async (fastify) => {
 *       fastify.get("/devices", async (request, reply) => {
 *         const user = signedInUser(request);          // never null in here
 *         return reply.tetherRender("devices", { title: "Devices", devices: await list(user.id) });
 *       });
 *     };
 *
 * Every route the plugin adds (and every plugin it registers in turn, wrapped in fastify-plugin or
 * not) inherits the guard: nothing to call, nothing to forget. Templates go in `src/views` (start a
 * page with `<% layout("/layout") %>`); a navigation link goes in `src/views/layout.eta`. Site-admin-only pages add their own hook inside, as the admin pages do
 * (`request.requireSiteAdmin()` → a 403 page for others). The app names every page, Tether's own
 * included (`homePage`, `tokenPages`, `adminPages`, `devicePages` from `tether/web`), in the order to
 * register them; the example app's `buildApp({ guardedPages })` appends to its list.
 *
 * Registering into the context later (from another plugin, after it has loaded) is not offered:
 * Fastify would silently add such routes outside the context, unguarded.
 */
import type { FastifyPluginAsync, FastifyPluginCallback, FastifyRequest, RawServerDefault } from "fastify";
import fp from "fastify-plugin";
import { redirectTo } from "../http/error-handler.js";
import { LoginRequiredError } from "../http/errors.js";
import { isHtmxRequest } from "../http/htmx.js";
import { loginPath } from "./return-path.js";
import type { UiUser } from "../plugins/session/session-plugin.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The UI-safe signed-in user: set by the route guard inside the guarded context, null elsewhere. */
    tetherUser: UiUser | null;
  }
}

/**
 * A plugin of signed-in pages, async or callback style, with any type provider (plain or TypeBox).
 * It is registered without options: close over whatever it needs.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any options and any type provider, as Fastify's own register() accepts
export type GuardedPagePlugin = FastifyPluginAsync<any, RawServerDefault, any> | FastifyPluginCallback<any, RawServerDefault, any>;

export interface GuardedPagesOptions {
  /** The app's signed-in pages, registered in this order; all inherit the guard. The guard names none itself. */
  pages: GuardedPagePlugin[];
}

/** The guard's user, inside the guarded context; throws the login redirect if called outside it. */
export function signedInUser(request: FastifyRequest): UiUser {
  if (!request.tetherUser) throw new LoginRequiredError();
  return request.tetherUser;
}

/**
 * The page to come back to after signing in: the address itself for a page, the page htmx was updating for
 * an htmx request (only its path and query are kept, and loginPath accepts only a path on this site), none
 * for anything else.
 */
function returnPathOf(request: FastifyRequest): string | undefined {
  if (isHtmxRequest(request)) {
    const current = request.headers["hx-current-url"];
    if (typeof current !== "string") return undefined;
    try {
      const url = new URL(current, "http://current-url.invalid");
      return `${url.pathname}${url.search}`;
    } catch {
      return undefined;
    }
  }
  return request.method === "GET" ? request.url : undefined;
}

export const guardedPagesPlugin = fp<GuardedPagesOptions>(
  async (fastify, options) => {
    fastify.decorateRequest("tetherUser", null);

    await fastify.register(async function guardedPages(guarded) {
      guarded.addHook("onRequest", async (request, reply) => {
        reply.header("cache-control", "no-store");
        const session = await request.fetchSession();
        // A page opened signed out comes back after sign-in (`/login?next=/device%3Fuser_code%3D…`). An htmx
        // request is part of a page: it returns to that page (HX-Current-URL), whose session expired while it
        // was open. A plain form post is not a page to return to: it goes to /login.
        if (!session) return redirectTo(request, reply, loginPath(returnPathOf(request)), 302);
        request.tetherUser = session.user;
      });

      for (const page of options.pages) await guarded.register(page);
    });
  },
  // What the guard itself uses: the session (`fetchSession`) and the error handler (its redirect). Each
  // page declares what it needs (e.g. `tether-page-render`), so a page registers here without the public pages.
  { name: "tether-guarded-pages", fastify: "5.x", dependencies: ["tether-errors", "tether-session"] },
);
