import t from "tap";
import { guardedPagesPlugin, signedInUser } from "../../src/web/guard.js";
import { bare, bearer } from "../helpers/auth.js";
import { bareFastify, declaredDependencies, refusesWithout, signedUp } from "./bare.js";

const ownPage = async (fastify: import("fastify").FastifyInstance) => {
  fastify.get("/mine", async (request) => ({ user: signedInUser(request).id }));
};

t.test("it declares the session plugin it asks who is signed in", (t) => refusesWithout(t, guardedPagesPlugin, "tether-session", { pages: [] }));

t.test("guardedPagesPlugin alone: every page it is given is for the signed-in browser only", async (t) => {
  const { app, url } = await bareFastify(t, declaredDependencies(guardedPagesPlugin));
  await app.register(guardedPagesPlugin, { pages: [ownPage] });
  app.get("/outside", async (request) => ({ user: request.tetherUser }));
  await app.ready();

  const anonymous = await bare(url, "/mine");
  t.equal(anonymous.status, 302);
  t.equal(anonymous.headers.get("location"), "/login?next=%2Fmine", "to sign in, and back here after");
  t.equal(anonymous.headers.get("cache-control"), "no-store");
  t.equal((await bare(url, "/mine", { "hx-request": "true" })).headers.get("hx-redirect"), "/login", "htmx is redirected its own way");

  const owner = await signedUp(url);
  const mine = await owner.get("/mine");
  t.equal(mine.status, 200);
  t.same(await mine.json(), { user: owner.userId });
  t.equal(mine.headers.get("cache-control"), "no-store", "the back button after sign-out never shows it");

  const { token } = await app.tetherApiTokens.create({ userId: owner.userId, name: "script" });
  t.equal((await bare(url, "/mine", bearer(token))).status, 302, "an API token never opens a page");
  t.same(await (await owner.get("/outside")).json(), { user: null }, "routes outside the guard see no user");
});
