import t from "tap";
import { apiTokenRoutes } from "../../src/plugins/session/token-routes.js";
import { bare, bearer } from "../helpers/auth.js";
import { alone, refusesWithout, signedUp } from "./bare.js";

t.test("it declares the session plugin it stores tokens with", (t) => refusesWithout(t, apiTokenRoutes, "tether-session"));

t.test("apiTokenRoutes alone: mint once from a browser session, list, revoke", async (t) => {
  const { url } = await alone(t, apiTokenRoutes);
  t.equal((await bare(url, "/api/tokens")).status, 401);

  const owner = await signedUp(url);
  const minted = await owner.post("/api/tokens", { name: " ci ", scopes: ["tokens"] });
  t.equal(minted.status, 201);
  const { token, id, name } = (await minted.json()) as { token: string; id: string; name: string };
  t.match(token, /^sk_/);
  t.equal(name, "ci", "the name is trimmed");

  const listed = (await (await bare(url, "/api/tokens", bearer(token))).json()) as { tokens: Array<Record<string, unknown>> };
  t.match(listed.tokens, [{ id, name: "ci" }]);
  t.notOk(JSON.stringify(listed).includes(token), "the secret is shown once, never listed");

  const byToken = await bare(
    url,
    "/api/tokens",
    { ...bearer(token), "content-type": "application/json" },
    { method: "POST", body: JSON.stringify({ name: "more" }) },
  );
  t.equal(byToken.status, 403, "a token cannot mint tokens");
  t.match(await byToken.json(), { code: "COOKIE_SESSION_REQUIRED" });

  const typo = await owner.post("/api/tokens", { name: "x", expiresInDay: 1 });
  t.equal(typo.status, 400, "an unknown field is refused, not dropped");

  t.equal((await owner.delete(`/api/tokens/${id}`)).status, 204);
  t.equal((await owner.delete(`/api/tokens/${id}`)).status, 404);
  t.equal((await bare(url, "/api/tokens", bearer(token))).status, 401, "the revoked token no longer works");
});
