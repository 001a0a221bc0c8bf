import t from "tap";
import { tokenPages } from "../../src/web/routes/token-pages.js";
import { bare, bearer } from "../helpers/auth.js";
import { aloneBehindGuard, refusesWithout, showsPage, signedUp } from "./bare.js";

t.test("it declares the session plugin that keeps the tokens", (t) => refusesWithout(t, tokenPages, "tether-session"));

t.test("tokenPages alone behind the guard: create a token (shown once), revoke it", async (t) => {
  const { app, url } = await aloneBehindGuard(t, tokenPages);
  const owner = await signedUp(url);
  t.match(await showsPage(t, owner, "/settings/tokens", "API tokens"), "You have no API tokens");

  const created = await owner.request("POST", "/settings/tokens", { form: { name: "deploy", expiresInDays: "30" } });
  t.equal(created.status, 200);
  const token = /sk_[\w-]+/.exec(await created.text())?.[0];
  t.ok(token, "the new token's value is on the page, once");
  t.equal((await bare(url, "/api/tokens-do-not-exist-here", bearer(token!))).status, 404, "(no JSON token API in this app: the pages stand alone)");
  const [listed] = await app.tetherApiTokens.list(owner.userId);
  t.match(listed, { name: "deploy" });
  t.notMatch(await (await owner.get("/settings/tokens")).text(), token!, "never shown again");

  const blank = await owner.request("POST", "/settings/tokens", { form: { name: "  " } });
  t.equal(blank.status, 400, "a blank name is refused with the form");

  const revoked = await owner.request("POST", `/settings/tokens/${listed!.id}/revoke`);
  t.equal(revoked.status, 303);
  t.equal(revoked.headers.get("location"), "/settings/tokens?notice=revoked");
  t.same(await app.tetherApiTokens.list(owner.userId), []);
});
