import t from "tap";
import { authPlugin } from "../../src/plugins/auth/auth-plugin.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { bareFastify, refusesWithout } from "./bare.js";

t.test("it declares the origin guard that protects its endpoints", async (t) => {
  const { auth } = await bareFastify(t, ["tether-db"]);
  await refusesWithout(t, authPlugin, "tether-origin-guard", { auth });
});

t.test("authPlugin alone: better-auth under /api/auth, and fastify.tetherCallAuth on behalf of a request", async (t) => {
  const bare = await bareFastify(t, ["tether-errors", "tether-origin-guard", "tether-db"]);
  await bare.app.register(authPlugin, { auth: bare.auth });
  bare.app.post("/whoami", async (request, reply) => {
    const response = await bare.app.tetherCallAuth(request, reply, { method: "GET", path: "/get-session" });
    return { status: response.status, session: await response.json() };
  });
  await bare.app.ready();
  const { app, url } = bare;
  t.equal(app.tetherAuth, bare.auth);
  t.equal(app.tetherEdgeSsoEnabled(), false);
  t.equal(app.tetherPasskeysEnabled(), false);

  const client = new TestClient(url);
  const email = uniqueEmail("auth");
  const userId = await client.signUp(email);
  t.ok(client.cookies.get("better-auth.session_token"), "sign-up through the mounted API sets the session cookie");

  const session = await client.get("/api/auth/get-session");
  t.match(await session.json(), { user: { id: userId, email } });
  const bridged = await client.post("/whoami");
  t.match(await bridged.json(), { status: 200, session: { user: { id: userId } } }, "tetherCallAuth carries the request's cookies");

  const foreign = await new TestClient(url, { origin: "https://evil.example" }).post("/api/auth/sign-in/email", { email, password: "correct horse battery" });
  t.equal(foreign.status, 403, "the origin guard runs before better-auth");

  const unknown = await client.get("/api/auth/no-such-endpoint");
  t.equal(unknown.status, 404);
  t.match(await unknown.json(), { code: "NOT_FOUND" }, "an unknown auth endpoint gets the app's own not-found answer");
});
