/**
 * Signing in returns to the page that asked: a signed-out visit to a page (the device approval page with
 * its code, the OAuth sign-in stop) goes to /login with the path, and password, two-factor and passkey
 * sign-in land back there. Only paths on this site are followed: every open-redirect spelling goes home.
 */
import t from "tap";
import { afterSignIn, loginPath, safeReturnPath } from "../../src/web/return-path.js";
import { newUser, PASSWORD } from "../helpers/auth.js";
import { readJson, uniqueEmail } from "../helpers/client.js";
import { secretOf, totp } from "../helpers/totp.js";
import { browserClient, startPagesApp } from "./support.js";

const { url } = await startPagesApp(t, { env: { PASSKEYS_ENABLED: "true" } });
const DEVICE_PAGE = "/device?user_code=ABCD-EFGH";

t.test("only a path on this site is a return path, in any spelling", async (t) => {
  for (const good of ["/devices", DEVICE_PAGE, "/api/auth/oauth2/authorize?client_id=a&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb", "/a/b?c=%2F%2Fx#frag"]) {
    t.equal(safeReturnPath(good), good, good);
  }
  const evil = [
    "//evil.example",
    "//evil.example/path",
    "/\\evil.example",
    "\\\\evil.example",
    "/\\/evil.example",
    "https://evil.example",
    "http:evil.example",
    "javascript:alert(1)",
    "evil.example",
    "/%2F%2Fevil.example",
    "/%2f/evil.example",
    "/%5Cevil.example",
    "/%252F%252Fevil.example",
    "/%5C%5Cevil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/ /evil.example",
    "/%09/evil.example",
    "/%E0%A4%A",
    "",
    `/${"a".repeat(5000)}`,
  ];
  for (const bad of evil) t.equal(safeReturnPath(bad), undefined, JSON.stringify(bad));
  t.equal(safeReturnPath(["/devices"]), undefined, "not a string");
  t.equal(afterSignIn("//evil.example"), "/home");
  t.equal(loginPath(DEVICE_PAGE), "/login?next=%2Fdevice%3Fuser_code%3DABCD-EFGH");
  t.equal(loginPath("/home"), "/login", "home needs no return path");
  t.equal(loginPath("//evil.example"), "/login");
});

t.test("a signed-out visit to /device?user_code=… signs in with the password and lands back on it, code kept", async (t) => {
  const { email } = await newUser(url, "return");
  const browser = browserClient(url);
  const visit = await browser.get(DEVICE_PAGE);
  t.equal(visit.status, 302);
  const login = visit.headers.get("location")!;
  t.equal(login, "/login?next=%2Fdevice%3Fuser_code%3DABCD-EFGH");
  const page = await (await browser.get(login)).text();
  t.match(page, '<input type="hidden" name="next" value="/device?user_code=ABCD-EFGH">', "the form carries the path");
  t.match(page, 'data-next="/device?user_code=ABCD-EFGH"', "so does the passkey button");
  t.match(page, 'href="/signup?next=%2Fdevice%3Fuser_code%3DABCD-EFGH"', "and the sign-up link");
  const signedIn = await browser.request("POST", "/login", { form: { email, password: PASSWORD, next: "/device?user_code=ABCD-EFGH" } });
  t.equal(signedIn.status, 303);
  t.equal(signedIn.headers.get("location"), DEVICE_PAGE);
  const back = await browser.get(DEVICE_PAGE);
  t.equal(back.status, 400, "the page itself, signed in (this made-up code is unknown, which it says)");
  t.match(await back.text(), 'value="ABCD-EFGH"', "the code is still there");

  const again = await browser.get(login);
  t.equal(again.headers.get("location"), DEVICE_PAGE, "signed in already (another tab): straight on to the page");
});

t.test("an open redirect is never followed: the sign-in lands home", async (t) => {
  const { email } = await newUser(url, "evil");
  for (const next of ["//evil.example", "/\\evil.example", "https://evil.example/", "/%2F%2Fevil.example"]) {
    const browser = browserClient(url);
    const page = await (await browser.get(`/login?next=${encodeURIComponent(next)}`)).text();
    t.notMatch(page, 'name="next"', `${next}: not carried on the form`);
    const signedIn = await browser.request("POST", "/login", { form: { email, password: PASSWORD, next } });
    t.equal(signedIn.headers.get("location"), "/home", next);
  }
});

t.test("sign-up from the sign-in page keeps the return path", async (t) => {
  const browser = browserClient(url);
  const created = await browser.request("POST", "/signup", { form: { name: "Ada", email: uniqueEmail("return"), password: PASSWORD, next: "/settings/mcp" } });
  t.equal(created.status, 303);
  t.equal(created.headers.get("location"), "/settings/mcp");
});

t.test("with two-factor on, the path survives the second step", async (t) => {
  const user = await newUser(url, "return-2fa");
  const enabled = await readJson(await user.client.post("/api/auth/two-factor/enable", { password: PASSWORD }));
  const secret = secretOf(enabled.totpURI);
  const confirmed = await user.client.post("/api/auth/two-factor/verify-totp", { code: totp(secret) });
  t.equal(confirmed.status, 200);

  const browser = browserClient(url);
  const first = await browser.request("POST", "/login", { form: { email: user.email, password: PASSWORD, next: DEVICE_PAGE } });
  t.equal(first.status, 303);
  const step = first.headers.get("location")!;
  t.equal(step, "/login/two-factor?next=%2Fdevice%3Fuser_code%3DABCD-EFGH");
  const form = await (await browser.get(step)).text();
  t.match(form, '<input type="hidden" name="next" value="/device?user_code=ABCD-EFGH">');
  t.match(form, "/login/two-factor?method=backup&amp;next=%2Fdevice%3Fuser_code%3DABCD-EFGH", "switching to a backup code keeps it too");
  const wrong = await browser.request("POST", "/login/two-factor", { form: { code: "000000", next: DEVICE_PAGE } });
  t.equal(wrong.status, 401);
  t.match(await wrong.text(), '<input type="hidden" name="next" value="/device?user_code=ABCD-EFGH">', "a wrong code keeps it");
  const second = await browser.request("POST", "/login/two-factor", { form: { code: totp(secret, 1), next: DEVICE_PAGE } });
  t.equal(second.status, 303);
  t.equal(second.headers.get("location"), DEVICE_PAGE);
});

t.test("the OAuth sign-in stop sends the browser to /login and back to the same authorization request", async (t) => {
  const browser = browserClient(url);
  const page = await (await browser.get("/oauth/sign-in?client_id=abc&scope=host%3Acall&sig=secret")).text();
  const authorize = "/api/auth/oauth2/authorize?client_id=abc&scope=host%3Acall";
  t.match(page, `href="/login?next=${encodeURIComponent(authorize).replaceAll("%", "%")}"`.replace(/&/g, "&amp;"));
  t.notMatch(page, 'target="_blank"', "in the same tab");
  const signedOutConsent = await browser.get("/oauth/consent?client_id=abc&sig=x");
  t.equal(signedOutConsent.headers.get("location"), `/login?next=${encodeURIComponent("/oauth/consent?client_id=abc&sig=x")}`, "the consent page itself, too");
});

t.test("an htmx request whose session expired returns to the page it was part of; a form post goes to plain /login", async (t) => {
  const browser = browserClient(url);
  const htmx = await browser.get("/devices/panel/devices", { "hx-request": "true", "hx-current-url": `${url}/devices?proposals=abc#proposals-panel` });
  t.equal(htmx.status, 200);
  t.equal(htmx.headers.get("hx-redirect"), `/login?next=${encodeURIComponent("/devices?proposals=abc")}`, "back to the page, not to the fragment");
  const htmxPost = await browser.request("POST", "/devices/pair", { form: {}, headers: { "hx-request": "true", "hx-current-url": `${url}/devices` } });
  t.equal(htmxPost.headers.get("hx-redirect"), `/login?next=${encodeURIComponent("/devices")}`, "a button on the page returns to the page too");
  const elsewhere = await browser.get("/devices/panel/devices", { "hx-request": "true", "hx-current-url": "https://evil.example//evil.example/x" });
  t.equal(elsewhere.headers.get("hx-redirect"), "/login", "a path another site could be read from is dropped");
  const noHeader = await browser.get("/devices/panel/devices", { "hx-request": "true" });
  t.equal(noHeader.headers.get("hx-redirect"), "/login");
  t.equal((await browser.request("POST", "/devices/pair", { form: {} })).headers.get("location"), "/login", "a plain form post");
  t.equal((await browser.get("/home")).headers.get("location"), "/login", "home needs no return path");
});
