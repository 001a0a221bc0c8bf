import { Type } from "@sinclair/typebox";
import t from "tap";
import { errorHandlerPlugin } from "../../src/http/error-handler.js";
import { HttpError, LoginRequiredError } from "../../src/http/errors.js";
import { testFetch } from "../helpers/inject.js";
import { alone } from "./bare.js";

t.test("errorHandlerPlugin alone: every failure is a clear { code, message }, never a stack", async (t) => {
  const { app, url: base } = await alone(t, errorHandlerPlugin, {}, (app) => {
    app.get("/typed", async () => {
      throw new HttpError(409, "ALREADY_THERE", "That name is taken");
    });
    app.get("/bug", async () => {
      throw new Error("secret internals: password=hunter2");
    });
    app.get("/private", async () => {
      throw new LoginRequiredError();
    });
    app.post("/strict", { schema: { body: Type.Object({ name: Type.String() }, { additionalProperties: false }) } }, async () => ({ ok: true }));
  });
  t.equal(app.tetherErrorPages, null, "no pages plugin, so no page renderer: every error is JSON");

  const typed = await testFetch(`${base}/typed`);
  t.equal(typed.status, 409);
  t.same(await typed.json(), { code: "ALREADY_THERE", message: "That name is taken" });

  const bug = await testFetch(`${base}/bug`);
  t.equal(bug.status, 500);
  const bugText = await bug.text();
  t.same(JSON.parse(bugText), { code: "INTERNAL", message: "Something went wrong on our side; it has been logged" });
  t.notMatch(bugText, /hunter2|at .*\.ts/, "nothing internal leaks");

  const missing = await testFetch(`${base}/nowhere?x=1`);
  t.equal(missing.status, 404);
  t.same(await missing.json(), { code: "NOT_FOUND", message: "No route for GET /nowhere" });

  const invalid = await testFetch(`${base}/strict`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  t.equal(invalid.status, 400);
  t.same(await invalid.json(), { code: "INVALID_INPUT", message: 'body: missing field "name"' });

  const badJson = await testFetch(`${base}/strict`, { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
  t.equal(badJson.status, 400);
  t.same(await badJson.json(), { code: "INVALID_JSON", message: "Request body is not valid JSON" });

  const login = await testFetch(`${base}/private`, { redirect: "manual" });
  t.equal(login.status, 302);
  t.equal(login.headers.get("location"), "/login");
  const htmx = await testFetch(`${base}/private`, { headers: { "hx-request": "true" } });
  t.equal(htmx.status, 200);
  t.equal(htmx.headers.get("hx-redirect"), "/login", "htmx follows HX-Redirect itself");
});
