import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { renderPlugin } from "../../src/web/render.js";
import { testFetch } from "../helpers/inject.js";
import { alone, refusesWithout } from "./bare.js";

t.test("it declares the assets plugin whose URLs every page links", (t) => refusesWithout(t, renderPlugin, "tether-page-assets"));

t.test("renderPlugin alone: reply.tetherRender sends an escaped template, never cached", async (t) => {
  const views = await mkdtemp(path.join(os.tmpdir(), "tether-views-"));
  t.teardown(() => rm(views, { recursive: true, force: true }));
  await writeFile(path.join(views, "greet.eta"), '<p><%= it.name %></p><link href="<%= it.assets.css %>"><i><%= it.path %></i>');
  const { url } = await alone(t, renderPlugin, { viewsDir: views }, (app) => {
    app.get("/greet", async (request, reply) => reply.tetherRender("greet", { name: (request.query as { name: string }).name }));
  });
  const page = await testFetch(`${url}/greet?name=${encodeURIComponent("<script>alert(1)</script>")}`);
  t.equal(page.status, 200);
  t.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
  t.equal(page.headers.get("cache-control"), "no-store");
  const html = await page.text();
  t.match(html, "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>", "data is escaped");
  t.match(html, /href="\/assets\/app\.css\?v=/, "templates see the asset URLs");
  t.match(html, "<i>/greet</i>", "and the path without its query");
});
