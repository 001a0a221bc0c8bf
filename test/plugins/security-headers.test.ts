import t from "tap";
import { CONTENT_SECURITY_POLICY, securityHeadersPlugin } from "../../src/web/security-headers.js";
import { testFetch } from "../helpers/inject.js";
import { alone } from "./bare.js";

const routes = (app: import("fastify").FastifyInstance) => {
  app.get("/page", async (_request, reply) => reply.type("text/html").send("<p>hi</p>"));
  app.get("/framed", async (_request, reply) => reply.header("x-frame-options", "SAMEORIGIN").send("ok"));
};

t.test("securityHeadersPlugin alone: every response carries the policy; a route may set its own", async (t) => {
  const { url } = await alone(t, securityHeadersPlugin, { https: false }, routes);
  const page = await testFetch(`${url}/page`);
  t.equal(page.headers.get("content-security-policy"), CONTENT_SECURITY_POLICY);
  t.match(CONTENT_SECURITY_POLICY, /script-src 'self'/, "no inline script");
  t.equal(page.headers.get("x-content-type-options"), "nosniff");
  t.equal(page.headers.get("x-frame-options"), "DENY");
  t.equal(page.headers.get("referrer-policy"), "same-origin");
  t.equal(page.headers.get("strict-transport-security"), null, "no HSTS over http");
  t.equal((await testFetch(`${url}/nowhere`)).headers.get("x-frame-options"), "DENY", "errors too");
  t.equal((await testFetch(`${url}/framed`)).headers.get("x-frame-options"), "SAMEORIGIN", "a route's own value is kept");
});

t.test("over https the browser is told to stay on https", async (t) => {
  const { url } = await alone(t, securityHeadersPlugin, { https: true }, routes);
  t.equal((await testFetch(`${url}/page`)).headers.get("strict-transport-security"), "max-age=31536000");
});

t.test("policyWithFormActions adds plain http(s) origins only: nothing in a URL can start another directive", async (t) => {
  const { policyWithFormActions, cspSourceOf } = await import("../../src/web/security-headers.js");
  t.equal(cspSourceOf("http://127.0.0.1:8123/callback?x=1"), "http://127.0.0.1:8123");
  t.equal(cspSourceOf("https://client.example/cb"), "https://client.example");
  t.equal(cspSourceOf("http://[::1]:9/cb"), "http://[::1]:9");
  for (const url of ["http://x;sandbox", "https://a;sandbox/cb", "https://a,b/cb", "cursor://callback", "javascript:alert(1)", "not a url", "https://a'b/"]) {
    t.equal(cspSourceOf(url), undefined, url);
    t.equal(policyWithFormActions([url]), CONTENT_SECURITY_POLICY, `${url} leaves the policy as it is`);
  }
  t.match(policyWithFormActions(["https://client.example/cb"]), "form-action 'self' https://client.example;");
});
