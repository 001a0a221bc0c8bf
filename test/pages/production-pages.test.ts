/**
 * The pages as deployed: rate limiting on (NODE_ENV=production), edge SSO switched on, and https.
 */
import t from "tap";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { browserClient, HTMX_HEADERS, startPagesApp, textOf } from "./support.js";

const PASSWORD = "correct horse battery";
const EDGE_SECRET = "edge-proxy-shared-secret";
const PRODUCTION = { NODE_ENV: "production", BETTER_AUTH_SECRET: "production-secret-0123456789abcdef0123" };

t.test("production with edge SSO", async (t) => {
  const { url } = await startPagesApp(t, {
    env: { ...PRODUCTION, SSO_ENABLED: "true", EDGE_SSO_SECRET: EDGE_SECRET, EDGE_SSO_PROVISION: "true" },
  });

  t.test("the SSO button shows when SSO is on; through the proxy it ends on /home", async (t) => {
    const login = await (await browserClient(url).get("/login")).text();
    t.match(login, /<form method="post" action="\/login\/sso">\s*<button type="submit"[^>]*>Sign in with single sign-on<\/button>/);

    const email = uniqueEmail("sso");
    const proxied = browserClient(url, { headers: { "x-edge-secret": EDGE_SECRET, "x-remote-email": email, "x-remote-user": "Kerberos Kim" } });
    const response = await proxied.request("POST", "/login/sso");
    t.equal(response.status, 303);
    t.equal(response.headers.get("location"), "/home");
    t.match(textOf(await (await proxied.get("/home")).text()), "Welcome, Kerberos Kim");
  });

  t.test("an SSO attempt that did not come through the proxy: the sign-in page with the reason", async (t) => {
    const response = await browserClient(url, { headers: { "x-remote-email": uniqueEmail("spoof") } }).request("POST", "/login/sso");
    t.equal(response.status, 403);
    t.equal(response.headers.getSetCookie().length, 0);
    const html = await response.text();
    t.match(html, /<div class="alert alert-error" role="alert" id="sso-error">Edge sign-in is accepted only from the configured reverse proxy<\/div>/);
  });

  t.test("too many sign-in attempts: the form says how long to wait (429)", async (t) => {
    const email = uniqueEmail("limited");
    await new TestClient(url).signUp(email, PASSWORD, "Limited Lee");
    const client = browserClient(url);
    let response: Response | undefined;
    for (let attempt = 0; attempt < 15; attempt += 1) {
      response = await client.request("POST", "/login", { form: { email, password: "wrong password" } });
      if (response.status === 429) break;
      t.equal(response.status, 401);
    }
    t.equal(response!.status, 429);
    t.match(response!.headers.get("retry-after"), /^\d+$/, "the standard Retry-After header too");
    t.match(textOf(await response!.text()), /Too many attempts\. Wait \d+ seconds, then try again\./);
    const htmx = await client.request("POST", "/login", { form: { email, password: PASSWORD }, headers: HTMX_HEADERS });
    t.equal(htmx.status, 429, "even the right password waits");
    t.match(await htmx.text(), /^<form id="login-form"[\s\S]*role="alert"[^>]*>Too many attempts/);
  });
});

t.test("behind https: a Secure session cookie and HSTS", async (t) => {
  // The TLS terminator in front of us is https://tether.example; the app itself speaks plain HTTP.
  const httpsOrigin = "https://tether.example";
  const { url } = await startPagesApp(t, { env: { ...PRODUCTION, BETTER_AUTH_URL: httpsOrigin } });
  const email = uniqueEmail("secure");
  const client = browserClient(url, { origin: httpsOrigin });
  const signup = await client.request("POST", "/signup", { form: { name: "Secure Sam", email, password: PASSWORD } });
  t.equal(signup.status, 303);
  const cookie = signup.headers.getSetCookie().find((c) => c.includes("session_token="));
  t.match(cookie, /^__Secure-better-auth\.session_token=/);
  t.match(cookie, /; Secure/i);
  t.match(cookie, /; HttpOnly/i);
  t.match(cookie, /; SameSite=Lax/i);
  t.equal(signup.headers.get("strict-transport-security"), "max-age=31536000");
});
