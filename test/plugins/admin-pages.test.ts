import t from "tap";
import { adminPages } from "../../src/web/routes/admin-pages.js";
import { makeSiteAdmin } from "../helpers/auth.js";
import { aloneBehindGuard, refusesWithout, showsPage, signedUp } from "./bare.js";

t.test("it declares the activity log it records admin acts in", (t) => refusesWithout(t, adminPages, "tether-activity"));

t.test("adminPages alone behind the guard: site admins manage users, others are refused", async (t) => {
  const { app, url } = await aloneBehindGuard(t, adminPages);
  const member = await signedUp(url, "member");
  const forbidden = await member.get("/admin/users");
  t.equal(forbidden.status, 403, "(no error pages registered here: the refusal is the error handler's JSON)");
  t.match(await forbidden.json(), { code: "FORBIDDEN" });

  const admin = await signedUp(url, "admin");
  await makeSiteAdmin(app, admin.userId);
  t.match(await showsPage(t, admin, "/admin/users", "Users"), member.userId, "the list links every user");

  const signedOut = await admin.request("POST", `/admin/users/${member.userId}/revoke-sessions`);
  t.equal(signedOut.status, 303);
  t.equal((await member.get("/admin/users")).status, 302, "the member's session ended at once");
  await app.tetherActivity.flush();
  const logged = await app.tetherActivity.list({ userId: member.userId, event: "session.revoke-all" });
  t.match(logged.entries, [{ actor: "admin" }], "the act is in the activity log");
});
