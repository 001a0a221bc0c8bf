import t from "tap";
import { routeInventoryPlugin } from "../../src/http/route-inventory.js";
import { testFetch } from "../helpers/inject.js";
import { alone } from "./bare.js";

t.test("routeInventoryPlugin alone: fastify.tetherRoutes lists every route registered after it", async (t) => {
  const { app, url } = await alone(t, routeInventoryPlugin, {}, (app) => {
    app.get("/a", { schema: { response: { 200: { type: "object", properties: { ok: { type: "boolean" } } }, "4xx": { type: "object" } } } }, async () => ({
      ok: true,
    }));
    app.route({
      method: ["GET", "POST"],
      url: "/b/:id",
      schema: { querystring: { type: "object", properties: { before: { type: "string" }, q: { type: "string" } } } },
      handler: async () => ({ ok: true }),
    });
    void app.register(async (child) => child.delete("/c", async () => ({ ok: true })), { prefix: "/child" });
  });
  t.equal((await testFetch(`${url}/a`)).status, 200, "the app answers as usual");
  const listed = app.tetherRoutes.filter((route) => route.method !== "HEAD");
  t.same(listed, [
    { method: "GET", url: "/a", responseStatuses: ["200", "4xx"], queryParameters: [] },
    { method: "GET", url: "/b/:id", responseStatuses: [], queryParameters: ["before", "q"] },
    { method: "POST", url: "/b/:id", responseStatuses: [], queryParameters: ["before", "q"] },
    { method: "DELETE", url: "/child/c", responseStatuses: [], queryParameters: [] },
  ]);
});
