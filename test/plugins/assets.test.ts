import t from "tap";
import { assetsPlugin } from "../../src/web/assets.js";
import { testFetch } from "../helpers/inject.js";
import { alone, refusesWithout } from "./bare.js";

t.test("it declares the error handler that answers for a missing file", (t) => refusesWithout(t, assetsPlugin, "tether-errors"));

t.test("assetsPlugin alone: versioned, cacheable files from memory, and nothing else under /assets", async (t) => {
  const { app, url } = await alone(t, assetsPlugin);
  t.match(app.tetherAssets, { css: /^\/assets\/app\.css\?v=[\w-]{12}$/, htmx: /^\/assets\/htmx\.min\.js\?v=/ });

  const versioned = await testFetch(url + app.tetherAssets.css);
  t.equal(versioned.status, 200);
  t.equal(versioned.headers.get("content-type"), "text/css; charset=utf-8");
  t.equal(versioned.headers.get("cache-control"), "public, max-age=31536000, immutable");
  t.ok((await versioned.text()).length > 0);

  const plain = await testFetch(`${url}/assets/app.css`);
  t.equal(plain.headers.get("cache-control"), "no-cache", "an unversioned URL revalidates");
  const etag = plain.headers.get("etag")!;
  t.equal((await testFetch(`${url}/assets/app.css`, { headers: { "if-none-match": etag } })).status, 304);

  const htmx = await testFetch(url + app.tetherAssets.htmx);
  t.match(htmx.headers.get("content-type"), /javascript/, "htmx is served from our own origin");

  const missing = await testFetch(`${url}/assets/..%2Fpackage.json`);
  t.equal(missing.status, 404);
  t.same(await missing.json(), { code: "NOT_FOUND", message: "No such file" });
});
