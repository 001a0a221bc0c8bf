import t from "tap";
import { sessionPlugin } from "../../src/plugins/session/session-plugin.js";
import { bare, bearer } from "../helpers/auth.js";
import { alone, refusesWithout, signedUp } from "./bare.js";

t.test("it declares the cookie parser it reads sessions with", (t) => refusesWithout(t, sessionPlugin, "@fastify/cookie"));

t.test("sessionPlugin alone: cookie and token sessions, the login redirect, the admin check", async (t) => {
  const { app, url } = await alone(t, sessionPlugin, {}, (app) => {
    app.get("/me", async (request) => ({
      user: (await request.requireSession()).user.id,
      ui: await request.fetchSession(),
      token: await request.getApiToken(),
    }));
    app.get("/scoped", async (request) => ({ user: (await request.getSession({ requiredScope: "reports" }))?.user.id ?? null }));
    app.get("/admin", async (request) => ({ admin: (await request.requireSiteAdmin()).user.id }));
  });
  const anonymous = await bare(url, "/me");
  t.equal(anonymous.status, 302);
  t.equal(anonymous.headers.get("location"), "/login");

  const owner = await signedUp(url);
  const me = await owner.get("/me");
  t.equal(me.status, 200);
  t.match(await me.json(), { user: owner.userId, ui: { user: { id: owner.userId, isSiteAdmin: false } }, token: null });
  t.equal((await owner.get("/admin")).status, 403, "a signed-in non-admin is forbidden, not sent to sign in");

  const { token } = await app.tetherApiTokens.create({ userId: owner.userId, name: "script", scopes: ["reports"] });
  const viaToken = await bare(url, "/me", bearer(token));
  t.match(await viaToken.json(), { user: owner.userId, ui: null, token: { scopes: ["reports"] } }, "a token is a session, but never a page session");
  t.same(await (await bare(url, "/scoped", bearer(token))).json(), { user: owner.userId });

  const { token: narrow } = await app.tetherApiTokens.create({ userId: owner.userId, name: "narrow", scopes: ["other"] });
  t.same(await (await bare(url, "/scoped", bearer(narrow))).json(), { user: null }, "a token without the scope is anonymous");

  const [listed] = (await app.tetherApiTokens.list(owner.userId)).filter((entry) => entry.name === "script");
  t.ok(await app.tetherApiTokens.revoke(owner.userId, listed!.id));
  t.equal((await bare(url, "/me", bearer(token))).status, 302, "a revoked token stops working at once");
});
