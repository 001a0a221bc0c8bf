import t from "tap";
import { CONTENT_SECURITY_POLICY, securityHeadersPlugin } from "../../src/web/security-headers.js";
import { alone } from "./bare.js";

const routes = (app: import("fastify").FastifyInstance) => {
  app.get("/page", async (_request, reply) => reply.type("text/html").send("<p>hi</p>"));
  app.get("/framed", async (_request, reply) => reply.header("x-frame-options", "SAMEORIGIN").send("ok"));
};

t.test("securityHeadersPlugin alone: every response carries the policy; a route may set its own", async (t) => {
  const { url } = await alone(t, securityHeadersPlugin, { https: false }, routes);
  const page = await fetch(`${url}/page`);
  t.equal(page.headers.get("content-security-policy"), CONTENT_SECURITY_POLICY);
  t.match(CONTENT_SECURITY_POLICY, /script-src 'self'/, "no inline script");
  t.equal(page.headers.get("x-content-type-options"), "nosniff");
  t.equal(page.headers.get("x-frame-options"), "DENY");
  t.equal(page.headers.get("referrer-policy"), "same-origin");
  t.equal(page.headers.get("strict-transport-security"), null, "no HSTS over http");
  t.equal((await fetch(`${url}/nowhere`)).headers.get("x-frame-options"), "DENY", "errors too");
  t.equal((await fetch(`${url}/framed`)).headers.get("x-frame-options"), "SAMEORIGIN", "a route's own value is kept");
});

t.test("over https the browser is told to stay on https", async (t) => {
  const { url } = await alone(t, securityHeadersPlugin, { https: true }, routes);
  t.equal((await fetch(`${url}/page`)).headers.get("strict-transport-security"), "max-age=31536000");
});
