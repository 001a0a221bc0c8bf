/**
 * The public pages over HTTP, as a browser without JavaScript (and htmx) would use them: sign-in,
 * sign-up, sign-out, the CSRF refusal, security headers, assets and error pages (password reset:
 * password-reset.test.ts).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import t from "tap";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { describeErrorPage } from "../../src/web/error-pages.js";
import { readAuthFailure } from "../../src/web/forms.js";
import { browserClient, HTMX_HEADERS, startPagesApp, textOf } from "./support.js";

const PASSWORD = "correct horse battery";
const { url } = await startPagesApp(t);

/** A user made through the JSON API; returns a browser-like client that is signed out. */
async function existingUser(name = "Ada Lovelace"): Promise<{ email: string; id: string }> {
  const email = uniqueEmail("page");
  const id = await new TestClient(url).signUp(email, PASSWORD, name);
  return { email, id };
}

async function signedIn(): Promise<{ client: TestClient; email: string }> {
  const { email } = await existingUser();
  const client = browserClient(url);
  const response = await client.request("POST", "/login", { form: { email, password: PASSWORD } });
  if (response.status !== 303) throw new Error(`sign-in failed: ${response.status}`);
  return { client, email };
}

t.test("GET / goes home, which sends a visitor without a session to /login", async (t) => {
  const client = browserClient(url);
  const root = await client.get("/");
  t.equal(root.status, 302);
  t.equal(root.headers.get("location"), "/home");
  const home = await client.get("/home");
  t.equal(home.status, 302);
  t.equal(home.headers.get("location"), "/login");
});

t.test("the sign-in page: labelled fields with autocomplete, no SSO button when SSO is off", async (t) => {
  const response = await browserClient(url).get("/login");
  t.equal(response.status, 200);
  t.match(response.headers.get("content-type"), /^text\/html/);
  const html = await response.text();
  t.match(html, /<label for="email">Email<\/label>/);
  t.match(html, /<input id="email" name="email" type="email" value=""[^>]* autocomplete="email"[^>]* required/);
  t.match(html, /<input id="password" name="password" type="password" value=""[^>]* autocomplete="current-password"/);
  t.match(html, /<form id="login-form"[^>]* method="post" action="\/login" hx-post="\/login"/, "a real form, enhanced by htmx");
  t.match(html, /href="\/forgot-password"/);
  t.notMatch(html, /single sign-on/i);
  t.notMatch(html, /role="alert" id="form-error"/, "no error before anything was sent");
});

t.test("sign in: 303 to /home with the session cookie (HttpOnly, SameSite=Lax); the layout shows the user", async (t) => {
  const { email } = await existingUser("Grace Hopper");
  const client = browserClient(url);
  const response = await client.request("POST", "/login", { form: { email, password: PASSWORD } });
  t.equal(response.status, 303);
  t.equal(response.headers.get("location"), "/home");
  const cookie = response.headers.getSetCookie().find((c) => c.startsWith("better-auth.session_token="));
  t.ok(cookie, "the session cookie is forwarded from better-auth");
  t.match(cookie, /; HttpOnly/i);
  t.match(cookie, /; SameSite=Lax/i);
  t.notMatch(cookie, /; Secure/i, "not Secure on plain http (it is behind https)");

  const home = await client.get("/home");
  t.equal(home.status, 200);
  t.equal(home.headers.get("cache-control"), "no-store", "a protected page is never cached");
  const html = await home.text();
  t.match(textOf(html), "Welcome, Grace Hopper");
  t.match(html, /<form method="post" action="\/logout"><button type="submit"[^>]*>Sign out<\/button><\/form>/);
});

t.test("sign in with a wrong password: the form again, the message announced, the email kept, focus on the password", async (t) => {
  const { email } = await existingUser();
  const client = browserClient(url);
  const response = await client.request("POST", "/login", { form: { email, password: "wrong password" } });
  t.equal(response.status, 401);
  t.same(
    response.headers.getSetCookie().filter((c) => c.includes("session_token=") && !/max-age=0/i.test(c)),
    [],
    "no session cookie",
  );
  const html = await response.text();
  t.match(html, /<div class="alert alert-error" role="alert" id="form-error">Invalid email or password<\/div>/);
  t.match(html, new RegExp(`<input id="email" name="email" type="email" value="${email.replace(/[.+]/g, "\\$&")}"`));
  t.match(html, /<input id="password" name="password" type="password" value=""[^>]*aria-describedby="form-error" aria-invalid="true" autofocus>/);
  t.match(html, /<html lang="en">/, "a whole page for a browser without JavaScript");
});

t.test("htmx sign-in: HX-Redirect on success, the form fragment (4xx, swapped) on failure", async (t) => {
  const { email } = await existingUser();
  const client = browserClient(url, { headers: HTMX_HEADERS });
  const failed = await client.request("POST", "/login", { form: { email, password: "nope nope nope" } });
  t.equal(failed.status, 401);
  const fragment = await failed.text();
  t.match(fragment, /^<form id="login-form"/, "only the form: htmx swaps it in place (outerHTML)");
  t.notMatch(fragment, /<html/);
  t.match(fragment, /role="alert"/);

  const ok = await client.request("POST", "/login", { form: { email, password: PASSWORD } });
  t.equal(ok.status, 200);
  t.equal(ok.headers.get("hx-redirect"), "/home");
  t.equal(ok.headers.get("location"), null);
  t.ok(client.cookies.has("better-auth.session_token"));
});

t.test("missing fields are asked for on the form (400), never a 500", async (t) => {
  const client = browserClient(url);
  const none = await client.request("POST", "/login", { form: {} });
  t.equal(none.status, 400);
  t.match(textOf(await none.text()), "Enter your email address.");
  const noPassword = await client.request("POST", "/login", { form: { email: "someone@example.com" } });
  t.equal(noPassword.status, 400);
  const html = await noPassword.text();
  t.match(textOf(html), "Enter your password.");
  t.match(html, /value="someone@example.com"/);
  const signup = await client.request("POST", "/signup", { form: { name: "  ", email: "x@example.com", password: PASSWORD } });
  t.equal(signup.status, 400);
  t.match(textOf(await signup.text()), "Enter your name.");
});

t.test("malformed form input gets a rendered 4xx page with its message, never a 500", async (t) => {
  const client = browserClient(url);
  const cases: Array<{ what: string; path: string; init: Parameters<TestClient["request"]>[2]; status: number; says: RegExp }> = [
    {
      what: "a huge value",
      path: "/login",
      init: { form: { email: "a".repeat(10_000), password: "x" } },
      status: 400,
      says: /"email" must NOT have more than 254 characters/,
    },
    {
      what: "a repeated field (an array)",
      path: "/login",
      init: { body: "email=a%40b.c&email=d%40e.f&password=x", headers: { "content-type": "application/x-www-form-urlencoded" } },
      status: 400,
      says: /"email" must be string/,
    },
    {
      what: "a number instead of text",
      path: "/signup",
      init: { json: { name: 5, email: "a@b.c", password: PASSWORD } },
      status: 400,
      says: /"name" must be string/,
    },
    { what: "not an object", path: "/login", init: { json: ["email"] }, status: 400, says: /must be object/ },
    { what: "plain text", path: "/login", init: { body: "email", headers: { "content-type": "text/plain" } }, status: 400, says: /body must be object/ },
    {
      what: "an unsupported body type",
      path: "/login",
      init: { body: "<email/>", headers: { "content-type": "application/xml" } },
      status: 415,
      says: /Unsupported Media Type/i,
    },
    { what: "a body over the limit", path: "/login", init: { form: { email: "x".repeat(1_100_000) } }, status: 413, says: /too large/i },
    {
      what: "a huge password",
      path: "/reset-password",
      init: { form: { token: "t", newPassword: "p".repeat(5000) } },
      status: 400,
      says: /"newPassword" must NOT have more than 128/,
    },
  ];
  for (const c of cases) {
    const response = await client.request("POST", c.path, c.init);
    t.equal(response.status, c.status, c.what);
    t.match(response.headers.get("content-type"), /^text\/html/, `${c.what}: a page`);
    t.match(textOf(await response.text()), c.says, `${c.what}: says what was wrong`);
  }
});

t.test("sign up: 303 to /home, signed in; a taken email or a short password renders the form again", async (t) => {
  const client = browserClient(url);
  const email = uniqueEmail("signup");
  const response = await client.request("POST", "/signup", { form: { name: "Alan Turing", email, password: PASSWORD } });
  t.equal(response.status, 303);
  t.equal(response.headers.get("location"), "/home");
  t.match(textOf(await (await client.get("/home")).text()), "Welcome, Alan Turing");

  const again = browserClient(url);
  const taken = await again.request("POST", "/signup", { form: { name: "Someone Else", email, password: PASSWORD } });
  t.equal(taken.status, 422);
  const html = await taken.text();
  t.match(textOf(html), "User already exists. Use another email.");
  t.match(html, /<input id="name" name="name" type="text" value="Someone Else"/, "the name is kept");
  t.match(html, /<input id="email"[^>]*aria-invalid="true" autofocus>/, "focus on the email");
  t.match(html, /autocomplete="new-password"/);

  const short = await again.request("POST", "/signup", { form: { name: "Shorty", email: uniqueEmail(), password: "short" } });
  t.equal(short.status, 400);
  t.match(textOf(await short.text()), "Choose a password of at least 8 characters.");
});

t.test("an authenticated visitor is sent home from /login and /signup before anything renders", async (t) => {
  const { client } = await signedIn();
  for (const path of ["/login", "/signup"]) {
    const response = await client.get(path);
    t.equal(response.status, 302, path);
    t.equal(response.headers.get("location"), "/home", path);
  }
  const post = await client.request("POST", "/login", { form: { email: "other@example.com", password: PASSWORD } });
  t.equal(post.status, 303, "no second sign-in runs");
  t.equal(post.headers.get("location"), "/home");
  const htmx = await client.get("/login", HTMX_HEADERS);
  t.equal(htmx.headers.get("hx-redirect"), "/home");
});

t.test("sign out: the session row is deleted, the cookie cleared, and the browser lands on a page that says so", async (t) => {
  const { client } = await signedIn();
  const stolenCookie = client.cookieHeader;
  const response = await client.request("POST", "/logout");
  t.equal(response.status, 303);
  t.equal(response.headers.get("location"), "/login?notice=signed-out");
  const landing = await client.get("/login?notice=signed-out");
  t.match(await landing.text(), /<div class="alert alert-success" role="status">You are signed out\. Sign in again to continue\.<\/div>/);
  t.match(response.headers.getSetCookie().join("\n"), /better-auth\.session_token=;[^\n]*Max-Age=0/i);
  t.equal(client.cookies.size, 0);
  const replay = await browserClient(url, { headers: { cookie: stolenCookie } }).get("/home");
  t.equal(replay.status, 302, "the old cookie no longer resolves: the row is gone");
  t.equal(replay.headers.get("location"), "/login");

  const htmx = await (await signedIn()).client.request("POST", "/logout", { headers: HTMX_HEADERS });
  t.equal(htmx.headers.get("hx-redirect"), "/login?notice=signed-out");
});

t.test("a cross-origin form post is refused with a clear 403 page, in one place, before anything runs", async (t) => {
  const { email } = await existingUser();
  const evil = browserClient(url, { origin: "https://evil.example" });
  const response = await evil.request("POST", "/login", { form: { email, password: PASSWORD } });
  t.equal(response.status, 403);
  t.equal(response.headers.getSetCookie().length, 0, "no session was created");
  const html = await response.text();
  t.match(html, /<h1[^>]*>Forbidden<\/h1>/);
  t.match(textOf(html), "This form was sent from a page that is not part of this site (https://evil.example), so it was refused.");
  t.match(textOf(html), `This site's address is ${url}.`, "the page names the address to use");
  t.match(html, `href="${url}/home"`, "as a link");

  const byReferer = browserClient(url, { origin: null, headers: { referer: "https://evil.example/page" } });
  t.equal(
    (await byReferer.request("POST", "/signup", { form: { name: "x", email: uniqueEmail(), password: PASSWORD } })).status,
    403,
    "Referer when there is no Origin",
  );
  const ownReferer = browserClient(url, { origin: null, headers: { referer: `${url}/login` } });
  t.equal((await ownReferer.request("POST", "/login", { form: { email, password: PASSWORD } })).status, 303, "our own Referer passes");

  const { client } = await signedIn();
  const crossSignOut = await browserClient(url, { origin: "https://evil.example", headers: { cookie: client.cookieHeader } }).request("POST", "/logout");
  t.equal(crossSignOut.status, 403, "not even sign-out can be forged");
  t.equal((await client.get("/home")).status, 200, "still signed in");

  const htmx = await evil.request("POST", "/login", { form: { email, password: PASSWORD }, headers: HTMX_HEADERS });
  t.equal(htmx.status, 403);
  t.equal(htmx.headers.get("hx-retarget"), "body", "htmx shows the whole error page, not a fragment of it");

  const api = await evil.request("POST", "/api/auth/sign-in/email", { json: { email, password: PASSWORD } });
  t.equal(api.status, 403);
  t.match(api.headers.get("content-type"), /application\/json/, "/api/* stays JSON");
});

t.test("every page carries security headers and no inline script or style", async (t) => {
  for (const path of ["/login", "/signup", "/forgot-password", "/no/such/page"]) {
    const response = await browserClient(url).get(path);
    const csp = response.headers.get("content-security-policy") ?? "";
    t.match(csp, /default-src 'none'/, path);
    t.match(csp, /script-src 'self'(;|$)/, `${path}: scripts from our origin only`);
    t.match(csp, /style-src 'self'(;|$)/);
    t.match(csp, /frame-ancestors 'none'/);
    t.match(csp, /form-action 'self'/);
    t.notMatch(csp, /unsafe-inline|unsafe-eval|https?:/, "nothing inline, nothing from elsewhere");
    t.equal(response.headers.get("x-content-type-options"), "nosniff");
    t.equal(response.headers.get("referrer-policy"), "same-origin");
    t.equal(response.headers.get("x-frame-options"), "DENY");
    t.equal(response.headers.get("cache-control"), "no-store");
    const html = await response.text();
    t.notMatch(html, /<script(?![^>]*\ssrc=")/, `${path}: every script is a file`);
    t.notMatch(html, /<style|\sstyle=/, `${path}: no inline style`);
    t.notMatch(html, /\son[a-z]+=/i, `${path}: no inline event handlers`);
    t.notMatch(html, /https?:\/\/(?!localhost)/, `${path}: nothing loaded from elsewhere`);
    const config = /<meta name="htmx-config" content="([^"]+)">/.exec(html)?.[1];
    t.ok(config, "htmx is configured by a meta tag");
    t.same(JSON.parse(config!.replaceAll("&quot;", '"')).noSwap, [204, 304], "4xx and 5xx bodies are swapped, on purpose");
  }
  const api = await new TestClient(url).get("/api/me");
  t.equal(api.headers.get("x-content-type-options"), "nosniff", "the JSON API too");
});

t.test("assets: htmx from node_modules and our stylesheet, from our origin, cached by version", async (t) => {
  const html = await (await browserClient(url).get("/login")).text();
  const htmxPath = /<script src="(\/assets\/htmx\.min\.js\?v=[\w-]+)" defer><\/script>/.exec(html)?.[1];
  const cssPath = /<link rel="stylesheet" href="(\/assets\/app\.css\?v=[\w-]+)">/.exec(html)?.[1];
  t.ok(htmxPath && cssPath, "the layout links versioned assets");
  const htmx = await fetch(url + htmxPath);
  t.equal(htmx.status, 200);
  t.match(htmx.headers.get("content-type"), /^text\/javascript/);
  t.equal(htmx.headers.get("cache-control"), "public, max-age=31536000, immutable");
  const shipped = readFileSync(createRequire(import.meta.url).resolve("htmx.org/dist/htmx.min.js"));
  t.ok(Buffer.from(await htmx.arrayBuffer()).equals(shipped), "exactly htmx.org's dist/htmx.min.js");

  const css = await fetch(url + cssPath);
  t.match(css.headers.get("content-type"), /^text\/css/);
  t.notMatch(await css.text(), /@import|url\(\s*["']?https?:/, "no external fonts or imports");
  const unversioned = await fetch(`${url}/assets/app.css`);
  t.equal(unversioned.headers.get("cache-control"), "no-cache");
  const revalidated = await fetch(`${url}/assets/app.css`, { headers: { "if-none-match": unversioned.headers.get("etag")! } });
  t.equal(revalidated.status, 304);
  t.equal((await browserClient(url).get("/assets/../package.json")).status, 404);
  t.equal((await browserClient(url).get("/assets/secret.env")).status, 404);
});

t.test("error pages for browsers, JSON for /api/* and for clients that do not ask for HTML", async (t) => {
  const page = await browserClient(url).get("/no/such/page");
  t.equal(page.status, 404);
  const html = await page.text();
  t.match(html, /<h1[^>]*>Page not found<\/h1>/);
  t.match(html, /href="\/login">Go to sign in/);
  const { client } = await signedIn();
  t.match(await (await client.get("/nothing-here")).text(), /href="\/home">Go to home/, "a signed-in visitor keeps the layout and a way home");

  const json = await new TestClient(url).get("/no/such/page");
  t.match(json.headers.get("content-type"), /application\/json/);
  const api = await browserClient(url).get("/api/no/such/thing");
  t.equal(api.status, 404);
  t.match(api.headers.get("content-type"), /application\/json/);

  t.match(describeErrorPage({ statusCode: 429, code: "TOO_MANY", message: "x" }, { retryAfterSeconds: 42 }), {
    heading: "Too many attempts",
    message: "Wait 42 seconds, then try again.",
  });
  t.match(describeErrorPage({ statusCode: 500, code: "INTERNAL", message: "secret detail" }), { heading: "Something went wrong" });
  t.notMatch(describeErrorPage({ statusCode: 500, code: "INTERNAL", message: "secret detail" }).message, /secret/);
  t.match(describeErrorPage({ statusCode: 400, code: "BAD", message: "the message" }), { message: "the message" });
});

t.test("a refused auth call without a message shows the generic text", async (t) => {
  t.match(await readAuthFailure(new Response("", { status: 401 }), "Login failed"), { status: 401, message: "Login failed" });
  t.match(await readAuthFailure(Response.json({ message: "" }, { status: 400 }), "Login failed"), { message: "Login failed" });
  t.match(await readAuthFailure(Response.json({ code: "X", message: "Nope" }, { status: 403 }), "Login failed"), { status: 403, code: "X", message: "Nope" });
  t.match(await readAuthFailure(new Response("", { status: 429, headers: { "x-retry-after": "30" } }), "Login failed"), {
    status: 429,
    message: "Too many attempts. Wait 30 seconds, then try again.",
  });
  t.match(await readAuthFailure(Response.json({ message: "db exploded at line 3" }, { status: 500 }), "Login failed"), {
    status: 500,
    message: "Something went wrong on our side. Please try again.",
  });
});
