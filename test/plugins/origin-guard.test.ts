import t from "tap";
import { originGuardPlugin } from "../../src/plugins/auth/origin-guard.js";
import { testFetch } from "../helpers/inject.js";
import { alone, refusesWithout } from "./bare.js";

const TRUSTED = "https://app.example.com";

t.test("it declares the error handler that shapes its refusals", (t) => refusesWithout(t, originGuardPlugin, "tether-errors", { trustedOrigins: [TRUSTED] }));

t.test("originGuardPlugin alone: state-changing requests must come from a trusted origin", async (t) => {
  const { url } = await alone(t, originGuardPlugin, { trustedOrigins: [`${TRUSTED}/some/path`] }, (app) => {
    app.post("/change", async () => ({ changed: true }));
    app.get("/read", async () => ({ read: true }));
  });
  const post = (headers: Record<string, string>) => testFetch(`${url}/change`, { method: "POST", headers });

  t.equal((await post({ origin: TRUSTED })).status, 200, "a trusted Origin (the list may hold URLs: their origin counts)");
  t.equal((await post({ referer: `${TRUSTED}/settings` })).status, 200, "no Origin: a trusted Referer");
  t.equal((await post({})).status, 200, "neither and no cookie: a script, with no ambient credential to abuse");

  const foreign = await post({ origin: "https://evil.example" });
  t.equal(foreign.status, 403);
  t.same(await foreign.json(), { code: "INVALID_ORIGIN", message: "This request came from an origin that is not trusted" });
  const foreignReferer = await post({ referer: "https://evil.example/page" });
  t.match(await foreignReferer.json(), { code: "INVALID_ORIGIN" });
  const cookieOnly = await post({ cookie: "session=abc" });
  t.equal(cookieOnly.status, 403);
  t.match(await cookieOnly.json(), { code: "MISSING_ORIGIN" });

  t.equal((await testFetch(`${url}/read`, { headers: { origin: "https://evil.example" } })).status, 200, "reads are never refused");
});
