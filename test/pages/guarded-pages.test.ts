/**
 * The signed-in area over HTTP: the route guard (and that a route added inside inherits it), the
 * API-token pages, the site-admin pages, and what htmx gets back.
 */
import type { FastifyPluginAsync } from "fastify";
import t from "tap";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { signedInUser } from "../../src/web/index.js";
import { browserClient, HTMX_HEADERS, startPagesApp, textOf } from "./support.js";
import { makeSiteAdmin } from "../helpers/auth.js";

const PASSWORD = "correct horse battery";

/** Routes added inside the guarded context by a plugin that knows nothing about the guard. */
let handlerRuns = 0;
const addedPages: FastifyPluginAsync = async (fastify) => {
  fastify.get("/added/whoami", async (request) => {
    handlerRuns += 1;
    return { user: request.tetherUser };
  });
  fastify.post("/added/action", async () => {
    handlerRuns += 1;
    return { ok: true };
  });
  // Nested one level further: still inside, still guarded.
  await fastify.register(async (nested) => {
    nested.get("/added/nested", async (request, reply) => reply.tetherRender("home", { title: "Nested", tokenCount: 0, userCount: 0, initials: "N" }));
    nested.get("/added/boom", async (request) => {
      signedInUser(request);
      throw new Error("database password is hunter2");
    });
  });
};

const { app, url } = await startPagesApp(t, { guardedPages: [addedPages] });

async function signedIn(name = "Page User"): Promise<{ client: TestClient; id: string; email: string }> {
  const email = uniqueEmail("guarded");
  const client = browserClient(url);
  const signup = await client.request("POST", "/signup", { form: { name, email, password: PASSWORD } });
  if (signup.status !== 303) throw new Error(`sign-up failed: ${signup.status}`);
  const me = (await (await new TestClient(url, { headers: { cookie: client.cookieHeader } }).get("/api/me")).json()) as { user: { id: string } };
  return { client, id: me.user.id, email };
}

t.test("the guard: no session → 302 /login (or HX-Redirect) before any protected handler runs", async (t) => {
  const anonymous = browserClient(url);
  for (const path of ["/home", "/settings/tokens", "/admin/users", "/added/whoami", "/added/nested", "/settings/tokens/x/revoke"]) {
    const response = await anonymous.get(path);
    t.equal(response.status, 302, path);
    // A page opened signed out comes back after sign-in (return-path.test.ts); home is where sign-in lands anyway.
    t.equal(response.headers.get("location"), path === "/home" ? "/login" : `/login?next=${encodeURIComponent(path)}`, path);
    t.equal(response.headers.get("cache-control"), "no-store", `${path}: no-store`);
  }
  for (const path of ["/settings/tokens", "/added/action", "/admin/users/x/deactivate"]) {
    const response = await anonymous.request("POST", path, { form: { name: "x" } });
    t.equal(response.status, 302, `POST ${path}`);
    t.equal(response.headers.get("location"), "/login");
  }
  t.equal(handlerRuns, 0, "no handler ran");
  const htmx = await anonymous.get("/home", HTMX_HEADERS);
  t.equal(htmx.status, 200);
  t.equal(htmx.headers.get("hx-redirect"), "/login", "htmx follows its redirect header with a full navigation");
});

t.test("a route added inside the guarded context inherits the guard and gets request.tetherUser", async (t) => {
  const { client, id, email } = await signedIn("Inherit Ida");
  const response = await client.get("/added/whoami");
  t.equal(response.status, 200);
  t.same(await response.json(), { user: { id, name: "Inherit Ida", email, isSiteAdmin: false } }, "the UI-safe user, nothing more");
  t.equal(response.headers.get("cache-control"), "no-store");
  t.equal((await client.get("/added/nested")).status, 200, "a nested plugin inside is guarded too");
  t.equal(handlerRuns, 1);

  // Outside the guarded context the decorator stays null, even for a signed-in request.
  t.equal(app.hasRequestDecorator("tetherUser"), true);
  const outside = await client.get("/login");
  t.equal(outside.status, 302, "(the guest-only pages send a signed-in visitor home)");
});

t.test("deactivation applies at once: the next page load is anonymous", async (t) => {
  const { client, id } = await signedIn();
  t.equal((await client.get("/home")).status, 200);
  await app.tetherDb.updateTable("user").set({ deactivatedAt: new Date() }).where("id", "=", id).execute();
  const response = await client.get("/home");
  t.equal(response.status, 302);
  t.equal(response.headers.get("location"), "/login");
});

t.test("a failing handler renders a 500 page that says nothing about internals", async (t) => {
  const { client } = await signedIn();
  const response = await client.get("/added/boom");
  t.equal(response.status, 500);
  const text = textOf(await response.text());
  t.match(text, "Something went wrong on our side.");
  t.notMatch(text, /hunter2|database/);
  const htmx = await client.get("/added/boom", HTMX_HEADERS);
  t.equal(htmx.status, 500);
  t.equal(htmx.headers.get("hx-retarget"), "body");
  t.equal(htmx.headers.get("hx-reswap"), "innerHTML show:top");
});

t.test("API tokens: create one, see it once, then only its prefix; it works as a bearer token", async (t) => {
  const { client } = await signedIn("Token Tess");
  const empty = await client.get("/settings/tokens");
  t.equal(empty.status, 200);
  t.match(textOf(await empty.text()), "You have no API tokens.");

  const created = await client.request("POST", "/settings/tokens", { form: { name: "CI deploys", expiresInDays: "30", scopes: "" } });
  t.equal(created.status, 200);
  t.equal(created.headers.get("cache-control"), "no-store", "the page with the secret is never stored");
  const html = await created.text();
  const token = /<input id="new-token"[^>]* readonly value="(sk_[A-Za-z0-9_-]{43})"/.exec(html)?.[1];
  t.ok(token, "the sk_ value is shown in a read-only field");
  t.match(html, /data-copy-target="#new-token"/, "with a copy button (shown when our script runs)");

  const me = await new TestClient(url, { headers: { authorization: `Bearer ${token}` } }).get("/api/me");
  t.equal(me.status, 200, "the token works");

  const again = await (await client.get("/settings/tokens")).text();
  t.notOk(again.includes(token!), "never shown again");
  t.match(again, new RegExp(`<code class="token-prefix">${token!.slice(0, 9)}…</code>`), "only the prefix is listed");
  t.match(textOf(again), "CI deploys");
});

t.test("API tokens: bad input renders the form again with the message (4xx), never a 500", async (t) => {
  const { client } = await signedIn();
  const cases: Array<{ form: Record<string, string>; says: string; field: string }> = [
    { form: { name: "   " }, says: "Give the token a name.", field: "name" },
    { form: { name: "x".repeat(101) }, says: "Use a name of at most 100 characters.", field: "name" },
    { form: { name: "ok", expiresInDays: "7" }, says: "Choose one of the offered lifetimes.", field: "expiresInDays" },
    { form: { name: "ok", expiresInDays: "30", scopes: "admin DROP;TABLE" }, says: "“DROP;TABLE” is not a scope", field: "scopes" },
  ];
  for (const c of cases) {
    const response = await client.request("POST", "/settings/tokens", { form: c.form });
    t.equal(response.status, 400, c.says);
    const html = await response.text();
    t.match(textOf(html), c.says);
    t.match(html, /role="alert"/);
  }
  const scoped = await client.request("POST", "/settings/tokens", { form: { name: "admin bot", expiresInDays: "", scopes: "admin, devices:read" } });
  t.equal(scoped.status, 200);
  t.match(await scoped.text(), /<span class="badge badge-accent">admin<\/span> <span class="badge badge-accent">devices:read<\/span>/);
  const huge = await client.request("POST", "/settings/tokens", { form: { name: "x".repeat(600) } });
  t.equal(huge.status, 400, "beyond the schema's bound: a rendered 400 page");
  t.match(huge.headers.get("content-type"), /^text\/html/);
});

t.test("API tokens with htmx: the panel fragment comes back, errors included (4xx swapped on purpose)", async (t) => {
  const { client } = await signedIn();
  const created = await client.request("POST", "/settings/tokens", { form: { name: "htmx made", expiresInDays: "90" }, headers: HTMX_HEADERS });
  t.equal(created.status, 200);
  const fragment = await created.text();
  t.match(fragment, /^<div id="tokens-panel" class="stack">/);
  t.notMatch(fragment, /<html/);
  t.match(fragment, /<input id="new-token"[^>]*autofocus>/, "focus moves to the new token");

  const refused = await client.request("POST", "/settings/tokens", { form: { name: "" }, headers: HTMX_HEADERS });
  t.equal(refused.status, 400);
  t.match(await refused.text(), /^<div id="tokens-panel"[\s\S]*role="alert"/);
});

t.test("API tokens: revoke, with a confirmation page for browsers without JavaScript", async (t) => {
  const { client } = await signedIn();
  const html = await (await client.request("POST", "/settings/tokens", { form: { name: "to revoke", expiresInDays: "30" } })).text();
  const token = /value="(sk_[^"]+)"/.exec(html)![1]!;
  const id = /action="\/settings\/tokens\/([^/"]+)\/revoke"/.exec(html)![1]!;
  t.match(
    html,
    new RegExp(`<form method="get" action="/settings/tokens/${id}/revoke" hx-post="/settings/tokens/${id}/revoke" hx-confirm="Revoke “to revoke”\\?`),
  );

  const confirm = await client.get(`/settings/tokens/${id}/revoke`);
  t.equal(confirm.status, 200);
  t.match(await confirm.text(), new RegExp(`<form method="post" action="/settings/tokens/${id}/revoke"`));

  const revoked = await client.request("POST", `/settings/tokens/${id}/revoke`);
  t.equal(revoked.status, 303);
  t.equal(revoked.headers.get("location"), "/settings/tokens?notice=revoked");
  t.match(textOf(await (await client.get("/settings/tokens?notice=revoked")).text()), "Token revoked.");
  t.equal((await new TestClient(url, { headers: { authorization: `Bearer ${token}` } }).get("/api/me")).status, 401, "the token is dead");
  t.equal((await client.request("POST", `/settings/tokens/${id}/revoke`)).status, 404, "twice: 404 page");

  const other = await signedIn("Other Owner");
  const theirs = await (await other.client.request("POST", "/settings/tokens", { form: { name: "theirs", expiresInDays: "30" } })).text();
  const theirId = /action="\/settings\/tokens\/([^/"]+)\/revoke"/.exec(theirs)![1]!;
  t.equal((await client.get(`/settings/tokens/${theirId}/revoke`)).status, 404, "someone else's token does not exist for you");
  t.equal((await client.request("POST", `/settings/tokens/${theirId}/revoke`)).status, 404);

  const htmx = await other.client.request("POST", `/settings/tokens/${theirId}/revoke`, { headers: HTMX_HEADERS });
  t.equal(htmx.status, 200);
  t.match(textOf(await htmx.text()), "Token “theirs” revoked.");
});

t.test("API tokens: only a browser session can mint a token through the page", async (t) => {
  const { client } = await signedIn();
  const html = await (await client.request("POST", "/settings/tokens", { form: { name: "script", expiresInDays: "30" } })).text();
  const token = /value="(sk_[^"]+)"/.exec(html)![1]!;
  const script = browserClient(url, { origin: null, headers: { authorization: `Bearer ${token}` } });
  const response = await script.request("POST", "/settings/tokens", { form: { name: "minted by a token" } });
  // Pages are for browsers: the guard sends a token caller to sign in before the form is read.
  t.equal(response.status, 302);
  t.equal(response.headers.get("location"), "/login");
  const list = await (await client.request("GET", "/settings/tokens")).text();
  t.notMatch(list, "minted by a token", "no token was minted");
});

t.test("admin pages: a non-admin gets a 403 Forbidden page; an admin manages users", async (t) => {
  const member = await signedIn("Member Mo");
  const forbidden = await member.client.get("/admin/users");
  t.equal(forbidden.status, 403);
  t.match(await forbidden.text(), /<h1[^>]*>Forbidden<\/h1>/);
  t.equal((await member.client.request("POST", `/admin/users/${member.id}/grant-admin`)).status, 403, "nor can they act");
  t.notMatch(await (await member.client.get("/home")).text(), /href="\/admin\/users"/, "no Users link for members");

  const admin = await signedIn("Admin Ana");
  await makeSiteAdmin(app, admin.id);
  const list = await admin.client.get("/admin/users");
  t.equal(list.status, 200);
  const html = await list.text();
  t.match(textOf(html), "Member Mo");
  t.match(html, new RegExp(`action="/admin/users/${member.id}/deactivate"`));
  t.notMatch(html, new RegExp(`action="/admin/users/${admin.id}/`), "no buttons on one's own row");

  const deactivated = await admin.client.request("POST", `/admin/users/${member.id}/deactivate`);
  t.equal(deactivated.status, 303);
  t.equal(deactivated.headers.get("location"), "/admin/users?notice=deactivate");
  t.match(textOf(await (await admin.client.get("/admin/users?notice=deactivate")).text()), "User deactivated and signed out everywhere.");
  t.equal((await member.client.get("/home")).status, 302, "the member is signed out at once");
  t.equal((await browserClient(url).request("POST", "/login", { form: { email: member.email, password: PASSWORD } })).status, 403, "and cannot sign in");

  t.equal((await admin.client.request("POST", `/admin/users/${member.id}/reactivate`)).status, 303);
  t.equal((await browserClient(url).request("POST", "/login", { form: { email: member.email, password: PASSWORD } })).status, 303, "reactivated");

  const granted = await admin.client.request("POST", `/admin/users/${member.id}/grant-admin`, { headers: HTMX_HEADERS });
  t.equal(granted.status, 200);
  const fragment = await granted.text();
  t.match(fragment, /^<div id="users-panel"/);
  t.match(textOf(fragment), "Member Mo is now a site admin.");
  t.equal((await member.client.get("/admin/users")).status, 302, "(their old session was deleted at deactivation)");
  t.equal((await admin.client.request("POST", `/admin/users/${member.id}/revoke-admin`)).status, 303);

  const self = await admin.client.request("POST", `/admin/users/${admin.id}/deactivate`);
  t.equal(self.status, 400);
  t.match(textOf(await self.text()), "You cannot deactivate your own account.");
  const demote = await admin.client.request("POST", `/admin/users/${admin.id}/revoke-admin`, { headers: HTMX_HEADERS });
  t.equal(demote.status, 400);
  t.equal(demote.headers.get("hx-retarget"), "body");
  t.match(textOf(await demote.text()), "You cannot remove your own site-admin role.");
  t.equal((await admin.client.request("POST", "/admin/users/no-such-user/deactivate")).status, 404);
  const longId = await admin.client.request("POST", `/admin/users/${"x".repeat(300)}/deactivate`);
  // Fastify answers this one in its router, before any hook or error handler (see the report).
  t.equal(longId.status, 414, "an id beyond Fastify's parameter length: refused, not a 500");
  t.equal((await admin.client.request("POST", `/admin/users/${member.id}/delete`)).status, 404, "no action by any other name");
});

t.test("a cross-origin post inside the guarded area is refused before the guard or handler", async (t) => {
  const { client } = await signedIn();
  const before = handlerRuns;
  const forged = browserClient(url, { origin: "https://evil.example", headers: { cookie: client.cookieHeader } });
  const response = await forged.request("POST", "/settings/tokens", { form: { name: "forged" } });
  t.equal(response.status, 403);
  t.match(textOf(await response.text()), "This form was sent from a page that is not part of this site");
  t.notMatch(await (await client.get("/settings/tokens")).text(), /forged/, "no token was created");
  t.equal((await forged.request("POST", "/added/action")).status, 403);
  t.equal(handlerRuns, before);
  const noOrigin = browserClient(url, { origin: null, headers: { cookie: client.cookieHeader } });
  t.equal((await noOrigin.request("POST", "/settings/tokens", { form: { name: "no origin" } })).status, 403, "a cookie without Origin or Referer is refused");
});
