/**
 * The first five minutes: every address `npm start` prints leads to pages whose forms work. A page opened
 * at another name of this machine moves to the configured address; a form refused by the origin check says
 * which address to use.
 */
import t from "tap";
import { isLoopbackHost } from "../../src/web/canonical-address.js";
import { browserClient, startPagesApp, textOf } from "./support.js";

const { app, url } = await startPagesApp(t);
const port = new URL(url).port;
const loopbackIp = `http://127.0.0.1:${port}`;
const HTML = { accept: "text/html,application/xhtml+xml" };

t.test("a page opened at 127.0.0.1 moves to the configured localhost address, path and query kept", async (t) => {
  const login = await fetch(`${loopbackIp}/login`, { headers: HTML, redirect: "manual" });
  t.equal(login.status, 302);
  t.equal(login.headers.get("location"), `${url}/login`);

  const device = await fetch(`${loopbackIp}/device?user_code=ABCD-EFGH`, { headers: HTML, redirect: "manual" });
  t.equal(device.headers.get("location"), `${url}/device?user_code=ABCD-EFGH`);

  const odd = await fetch(`${loopbackIp}//evil.example/x`, { headers: HTML, redirect: "manual" });
  t.equal(odd.headers.get("location"), `${url}//evil.example/x`, "a path that looks like a host stays a path on our origin");

  const followed = await fetch(`${loopbackIp}/login`, { headers: HTML });
  t.equal(followed.status, 200, "the redirect ends on the sign-in page");
  t.equal(followed.url, `${url}/login`);
});

t.test("only browser page requests move: the JSON API, assets and scripts are served where they asked", async (t) => {
  const api = await fetch(`${loopbackIp}/healthz`, { redirect: "manual" });
  t.not(api.status, 302, "no Accept: text/html, no redirect");
  const json = await fetch(`${loopbackIp}/api/me`, { headers: HTML, redirect: "manual" });
  t.equal(json.status, 401, "/api/ is never redirected");
  const post = await browserClient(loopbackIp).request("POST", "/login", { form: { email: "a@example.com", password: "x" } });
  t.equal(post.status, 403, "a form post is not redirected (the origin check refuses it)");
});

t.test("a refused form names the address to use, as a link", async (t) => {
  const post = await browserClient(loopbackIp).request("POST", "/login", { form: { email: "a@example.com", password: "x" } });
  const html = await post.text();
  t.match(textOf(html), `not part of this site (${loopbackIp})`);
  t.match(textOf(html), `This site's address is ${url}.`);
  t.match(html, `<a class="button button-primary" href="${url}/home">Open ${url}</a>`);
});

t.test("a browser on another machine is not sent to a localhost that would be its own", async (t) => {
  const remote = await app.inject({ method: "GET", url: "/login", headers: { ...HTML, host: `192.168.1.5:${port}` }, remoteAddress: "192.168.1.9" });
  t.equal(remote.statusCode, 200);
  const local = await app.inject({ method: "GET", url: "/login", headers: { ...HTML, host: `192.168.1.5:${port}` }, remoteAddress: "127.0.0.1" });
  t.equal(local.statusCode, 302, "the same name used from this machine moves");
  t.equal(local.headers.location, `${url}/login`);
  const same = await app.inject({ method: "GET", url: "/login", headers: { ...HTML, host: `localhost:${port}` } });
  t.equal(same.statusCode, 200, "the configured name is served");
});

t.test("production serves every name as it is (a proxy decides there)", async (t) => {
  const production = await startPagesApp(t, { env: { NODE_ENV: "production", BETTER_AUTH_SECRET: "a-production-secret-0123456789abcdef" } });
  const response = await production.app.inject({ method: "GET", url: "/login", headers: { ...HTML, host: `127.0.0.1:${port}` } });
  t.equal(response.statusCode, 200);
});

t.test("loopback names", async (t) => {
  for (const name of ["localhost", "LOCALHOST", "app.localhost", "127.0.0.1", "127.1.2.3", "[::1]", "::1"]) t.ok(isLoopbackHost(name), name);
  for (const name of ["example.com", "192.168.1.5", "localhost.example.com", "[::2]", "128.0.0.1"]) t.notOk(isLoopbackHost(name), name);
});
