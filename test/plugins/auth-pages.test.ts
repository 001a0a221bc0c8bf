import t from "tap";
import { authPages } from "../../src/web/routes/auth-pages.js";
import { PASSWORD } from "../helpers/auth.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { alone, refusesWithout } from "./bare.js";

t.test("it declares the renderer its forms are drawn with", (t) => refusesWithout(t, authPages, "tether-page-render"));

t.test("authPages alone: sign up, sign out, sign in, ask for a reset, all as plain forms", async (t) => {
  const { url } = await alone(t, authPages);
  const browser = new TestClient(url, { headers: { accept: "text/html" } });
  t.match(await (await browser.get("/signup")).text(), "<h1>Create your account</h1>");

  const short = await browser.request("POST", "/signup", { form: { name: "A", email: uniqueEmail("short"), password: "short" } });
  t.equal(short.status, 400);
  t.match(await short.text(), /at least \d+ characters/, "the form says what is wrong");

  const email = uniqueEmail("auth-pages");
  const signup = await browser.request("POST", "/signup", { form: { name: "Form Person", email, password: PASSWORD } });
  t.equal(signup.headers.get("location"), "/home");

  const logout = await browser.request("POST", "/logout");
  t.equal(logout.status, 303);
  t.equal(logout.headers.get("location"), "/login?notice=signed-out", "to a page that says so");
  t.notOk(browser.cookies.get("better-auth.session_token"), "the session cookie is gone");

  const login = await browser.request("POST", "/login", { form: { email, password: PASSWORD } });
  t.equal(login.status, 303);
  t.equal(login.headers.get("location"), "/home");
  t.ok(browser.cookies.get("better-auth.session_token"));

  const stranger = new TestClient(url, { headers: { accept: "text/html" } });
  const forgot = await stranger.request("POST", "/forgot-password", { form: { email: uniqueEmail("nobody") } });
  t.equal(forgot.status, 200, "the same answer whether or not the account exists");
  t.match(await forgot.text(), "<h1>Reset your password</h1>");
});
