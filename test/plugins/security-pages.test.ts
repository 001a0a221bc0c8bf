import t from "tap";
import { securityPages } from "../../src/web/routes/security-pages.js";
import { PASSWORD } from "../helpers/auth.js";
import { TestClient } from "../helpers/client.js";
import { aloneBehindGuard, refusesWithout, showsPage, signedUp } from "./bare.js";

t.test("it declares the form parser its forms post through", (t) => refusesWithout(t, securityPages, "@fastify/formbody"));

t.test("securityPages alone behind the guard: change the password, with the current one", async (t) => {
  const { url } = await aloneBehindGuard(t, securityPages);
  const owner = await signedUp(url, "secure");
  await showsPage(t, owner, "/settings/security", "Security");

  const wrong = await owner.request("POST", "/settings/security/password", { form: { currentPassword: "not it", newPassword: "a brand new password" } });
  t.equal(wrong.status, 400);
  t.match(await wrong.text(), "Your current password is not correct.");

  const changed = await owner.request("POST", "/settings/security/password", { form: { currentPassword: PASSWORD, newPassword: "a brand new password" } });
  t.equal(changed.status, 303);
  t.equal(changed.headers.get("location"), "/settings/security?notice=password");
  const email = (await (await owner.get("/api/auth/get-session")).json()) as { user: { email: string } };
  const signIn = await new TestClient(url).signIn(email.user.email, "a brand new password");
  t.equal(signIn.status, 200, "the new password works");
});
