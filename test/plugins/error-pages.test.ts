import t from "tap";
import { HttpError } from "../../src/http/errors.js";
import { errorPagesPlugin } from "../../src/web/error-pages.js";
import { testFetch } from "../helpers/inject.js";
import { alone, refusesWithout } from "./bare.js";

t.test("it declares the renderer it draws pages with", (t) => refusesWithout(t, errorPagesPlugin, "tether-page-render"));

t.test("errorPagesPlugin alone: browsers get a page, the JSON API stays JSON", async (t) => {
  const { url } = await alone(t, errorPagesPlugin, {}, (app) => {
    app.get("/taken", async () => {
      throw new HttpError(409, "ALREADY_THERE", "That name is taken");
    });
    app.get("/api/taken", async () => {
      throw new HttpError(409, "ALREADY_THERE", "That name is taken");
    });
    app.get("/bug", async () => {
      throw new Error("internal detail");
    });
  });
  const html = { accept: "text/html" };

  const missing = await testFetch(`${url}/nowhere`, { headers: html });
  t.equal(missing.status, 404);
  t.match(missing.headers.get("content-type"), /text\/html/);
  t.match(await missing.text(), /Page not found[\s\S]*There is nothing at this address/);

  const taken = await testFetch(`${url}/taken`, { headers: html });
  t.equal(taken.status, 409);
  t.match(await taken.text(), "That name is taken", "a 4xx page says the error's own message");

  const bug = await testFetch(`${url}/bug`, { headers: html });
  t.equal(bug.status, 500);
  const bugPage = await bug.text();
  t.match(bugPage, "Something went wrong on our side");
  t.notMatch(bugPage, "internal detail");

  const htmx = await testFetch(`${url}/taken`, { headers: { "hx-request": "true" } });
  t.equal(htmx.headers.get("hx-retarget"), "body", "htmx swaps the whole page, not a fragment");

  const api = await testFetch(`${url}/api/taken`, { headers: html });
  t.same(await api.json(), { code: "ALREADY_THERE", message: "That name is taken" }, "/api/* stays JSON even for a browser");
  t.same(await (await testFetch(`${url}/nowhere`)).json(), { code: "NOT_FOUND", message: "No route for GET /nowhere" }, "a script still gets JSON");
});
