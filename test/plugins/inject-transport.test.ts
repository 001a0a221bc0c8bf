/**
 * The tests' inject transport (test/helpers/inject.ts) against the real thing: the same requests to one app, once
 * through `injectFetch` and once through fetch over loopback, give the same answers (status, headers, each
 * Set-Cookie, body, redirects followed or not) and the app sees the same requests (Host, fetch's own headers,
 * bodies as fetch encodes them). The plugins area relies on this to drop sockets without weakening a test.
 */
import Fastify from "fastify";
import t from "tap";
import { freePort, closeListening } from "../helpers/app.js";
import { injectFetch, serveThroughInject, testFetch } from "../helpers/inject.js";

/** Headers only a socket adds (the Node server's own), which inject has no reason to invent. */
const SOCKET_ONLY = new Set(["date", "connection", "keep-alive", "transfer-encoding"]);

async function echoApp() {
  const app = Fastify();
  app.all("/echo", async (request, reply) => {
    reply.header("set-cookie", ["a=1; Path=/", "b=2; HttpOnly"]);
    return { method: request.method, url: request.url, headers: request.headers, body: request.body ?? null };
  });
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_request, body, done) => done(null, body));
  app.post("/see-other", async (_request, reply) => reply.redirect("/echo?from=post", 302));
  app.post("/keep", async (_request, reply) => reply.redirect("/echo?kept=1", 307));
  app.get("/loop", async (_request, reply) => reply.redirect("/loop", 302));
  app.get("/empty", async (_request, reply) => reply.code(204).send());
  const port = await freePort();
  await app.listen({ port, host: "127.0.0.1" });
  t.teardown(() => closeListening(app));
  return { app, url: `http://localhost:${port}` };
}

async function seen(response: Response) {
  return {
    status: response.status,
    statusText: response.statusText,
    url: response.url,
    redirected: response.redirected,
    headers: [...response.headers].filter(([name]) => !SOCKET_ONLY.has(name)),
    cookies: response.headers.getSetCookie(),
    // Parsed, so the order the headers were sent in (which inject does not keep) does not count.
    body: await response.text().then((text) => (text.startsWith("{") ? JSON.parse(text) : text)),
  };
}

t.test("through inject, the same requests get the same answers as over loopback", async (t) => {
  const { app, url } = await echoApp();
  const injected = injectFetch(app);
  const json = { method: "POST", headers: { "content-type": "application/json", origin: url }, body: JSON.stringify({ a: 1 }) };
  const cases: Array<[string, RequestInit]> = [
    ["/echo?q=1", {}],
    ["/echo", { headers: { cookie: "x=1; y=2", accept: "text/html" } }],
    ["/echo", { method: "POST", body: new URLSearchParams({ x: "1 2" }) }],
    ["/echo", { method: "PUT", body: new Uint8Array([1, 2, 3]) }],
    ["/see-other", json],
    ["/see-other", { ...json, redirect: "manual" }],
    ["/keep", json],
    ["/empty", {}],
    ["/echo", { method: "HEAD" }],
  ];
  for (const [path, init] of cases) {
    const overLoopback = await seen(await fetch(url + path, init));
    t.same(await seen(await injected(url + path, init)), overLoopback, `${init.method ?? "GET"} ${path} ${init.redirect ?? ""}`);
  }
  t.equal((await injected(`${url}/echo`)).headers.getSetCookie().length, 2, "each Set-Cookie apart");
  await t.rejects(fetch(`${url}/see-other`, { ...json, redirect: "error" }), TypeError);
  await t.rejects(injected(`${url}/see-other`, { ...json, redirect: "error" }), TypeError, "redirect: error throws as fetch does");
  await t.rejects(injected(`${url}/loop`), TypeError, "and so does a redirect loop");
});

t.test("testFetch sends a registered origin through inject, any other over the network", async (t) => {
  const { app, url } = await echoApp();
  const port = await freePort();
  const stop = serveThroughInject(`http://localhost:${port}`, app);
  t.teardown(stop);
  const viaInject = (await (await testFetch(`http://localhost:${port}/echo`)).json()) as { headers: Record<string, string> };
  t.equal(viaInject.headers.host, `localhost:${port}`, "the Host header is the URL's, as over loopback");
  t.throws(() => serveThroughInject(`http://localhost:${port}/`, app), "one app per origin");
  stop();
  await t.rejects(testFetch(`http://localhost:${port}/echo`), TypeError, "once stopped, nothing listens there");
  t.equal((await testFetch(`${url}/echo`)).status, 200, "an origin never registered goes over loopback");
});
