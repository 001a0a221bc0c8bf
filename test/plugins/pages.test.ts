import t from "tap";
import { pagesPlugin } from "../../src/web/index.js";
import { CONTENT_SECURITY_POLICY } from "../../src/web/security-headers.js";
import { PASSWORD } from "../helpers/auth.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { alone, refusesWithout } from "./bare.js";

t.test("it declares the form parser its sign-in forms post through", (t) => refusesWithout(t, pagesPlugin, "@fastify/formbody"));

t.test("pagesPlugin alone: the public pages, their assets, headers and error pages", async (t) => {
  const { app, url } = await alone(t, pagesPlugin);
  const browser = new TestClient(url, { headers: { accept: "text/html" } });

  const login = await browser.get("/login");
  t.equal(login.status, 200);
  t.equal(login.headers.get("content-security-policy"), CONTENT_SECURITY_POLICY, "security headers on every page");
  t.match(await login.text(), "<h1>Sign in to Tether</h1>");
  t.equal((await browser.get(app.tetherAssets.css)).status, 200, "and the assets the pages link");

  const email = uniqueEmail("pages");
  const signup = await browser.request("POST", "/signup", { form: { name: "Page Person", email, password: PASSWORD } });
  t.equal(signup.status, 303);
  t.equal(signup.headers.get("location"), "/home");
  t.ok(browser.cookies.get("better-auth.session_token"), "signed up and signed in");
  t.equal((await browser.get("/login")).headers.get("location"), "/home", "a signed-in visitor is sent home");

  const missing = await browser.get("/nowhere");
  t.equal(missing.status, 404);
  t.match(await missing.text(), "Page not found", "errors render as pages for a browser");

  const wrong = await new TestClient(url, { headers: { accept: "text/html" } }).request("POST", "/login", { form: { email, password: "not the password" } });
  t.equal(wrong.status, 401);
  t.match(await wrong.text(), /<h1>Sign in to Tether<\/h1>[\s\S]*Invalid email or password/i, "a refusal shows the form again, with why");
});
