/**
 * Pages are for browsers: no API token (scoped or not, even a site admin's) opens any route outside
 * `/api`. The routes come from the running app's own inventory (an `onRoute` hook), so a page added
 * later, by Tether or by the app, is covered without being listed here.
 */
import type { FastifyPluginAsync } from "fastify";
import t from "tap";
import { bearer, makeSiteAdmin, mintToken, PASSWORD } from "../helpers/auth.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { browserClient, startPagesApp } from "../pages/support.js";

/** A page an app adds, knowing nothing about the guard. */
const appPage: FastifyPluginAsync = async (fastify) => {
  fastify.get("/reports/:id", async () => ({ secret: "report contents" }));
};

const { app, url } = await startPagesApp(t, { guardedPages: [appPage] });

// A site admin with a cookie session and three tokens: unscoped, scoped to a read scope, and scoped
// to every scope Tether checks.
const admin = browserClient(url);
const email = uniqueEmail("page-guard");
const signUp = await admin.request("POST", "/signup", { form: { name: "Guard Admin", email, password: PASSWORD } });
if (signUp.status !== 303) throw new Error(`sign-up: ${signUp.status}`);
const apiClient = new TestClient(url, { headers: { cookie: admin.cookieHeader } });
const me = (await (await apiClient.get("/api/me")).json()) as { user: { id: string } };
await makeSiteAdmin(app, me.user.id);
const tokens = {
  unscoped: await mintToken(apiClient),
  "projects:read": await mintToken(apiClient, { scopes: ["projects:read"] }),
  "every scope": await mintToken(apiClient, { scopes: ["admin", "tokens", "host:call"] }),
};

const concrete = (pattern: string) => pattern.replace(/:[A-Za-z]+/g, "x").replace(/\*/g, "x");
// Machine endpoints, where a bearer token is the credential by design: the JSON API and the MCP
// endpoint (with its OAuth metadata). Every other route is a page, or public.
const MACHINE_ENDPOINT = /^\/(api\/|mcp$|\.well-known\/)/;
const pageRoutes = app.tetherRoutes.filter((route) => !MACHINE_ENDPOINT.test(route.url));

interface Outcome {
  status: number;
  location: string | null;
  hxRedirect: string | null;
}

async function outcome(method: string, path: string, headers: Record<string, string>): Promise<Outcome> {
  const init: RequestInit = { method, headers: { accept: "text/html", ...headers }, redirect: "manual" };
  if (method !== "GET" && method !== "HEAD") {
    init.headers = { ...init.headers, origin: url, "content-type": "application/x-www-form-urlencoded" };
    init.body = "name=x&scopes=admin";
  }
  const response = await fetch(url + path, init);
  await response.body?.cancel();
  return { status: response.status, location: response.headers.get("location"), hxRedirect: response.headers.get("hx-redirect") };
}

t.test("the inventory holds every page, the app's own included", async (t) => {
  const urls = new Set(pageRoutes.map((route) => route.url));
  for (const expected of ["/home", "/devices", "/devices/events", "/settings/tokens", "/settings/tokens/:id/revoke", "/admin/users", "/reports/:id"]) {
    t.ok(urls.has(expected), expected);
  }
});

t.test("the same pages open for the user's browser session", async (t) => {
  for (const path of ["/home", "/devices", "/settings/tokens", "/admin/users", "/reports/x"]) {
    t.equal((await outcome("GET", path, { cookie: admin.cookieHeader })).status, 200, path);
  }
});

t.test("a token caller gets exactly what an anonymous visitor gets, on every route outside /api", async (t) => {
  let guarded = 0;
  for (const route of pageRoutes) {
    const path = concrete(route.url);
    const anonymous = await outcome(route.method, path, {});
    if (anonymous.location === "/login" || anonymous.location?.startsWith("/login?next=")) guarded += 1;
    for (const [kind, token] of Object.entries(tokens)) {
      const asToken = await outcome(route.method, path, bearer(token));
      t.strictSame(asToken, anonymous, `${route.method} ${route.url} with a ${kind} token`);
    }
  }
  t.ok(guarded >= 10, `${guarded} guarded route-methods were checked`);
});

t.test("a token cannot revoke the user's other tokens through the page's form", async (t) => {
  const list = (await (await apiClient.get("/api/tokens")).json()) as { tokens: Array<{ id: string }> };
  const victim = list.tokens[0]!.id;
  const response = await outcome("POST", `/settings/tokens/${victim}/revoke`, bearer(tokens.unscoped));
  t.equal(response.status, 302);
  t.equal(response.location, "/login");
  const after = (await (await apiClient.get("/api/tokens")).json()) as { tokens: Array<{ id: string }> };
  t.ok(
    after.tokens.some((token) => token.id === victim),
    "the token is still there",
  );
});
