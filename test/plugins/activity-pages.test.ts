import t from "tap";
import { activityPages } from "../../src/web/routes/activity-pages.js";
import { makeSiteAdmin } from "../helpers/auth.js";
import { aloneBehindGuard, refusesWithout, showsPage, signedUp } from "./bare.js";

t.test("it declares the activity log it shows", (t) => refusesWithout(t, activityPages, "tether-activity"));

t.test("activityPages alone behind the guard: your own events, and everyone's for site admins", async (t) => {
  const { app, url } = await aloneBehindGuard(t, activityPages);
  const member = await signedUp(url, "member");
  app.tetherActivity.record({ userId: member.userId, event: "password.change", actor: "session", outcome: "ok" });
  await app.tetherActivity.flush();
  t.match(await showsPage(t, member, "/settings/activity", "Activity"), "Password changed");
  t.equal((await member.get("/admin/activity")).status, 403, "everyone's events are for site admins");

  const admin = await signedUp(url, "admin");
  await makeSiteAdmin(app, admin.userId);
  const all = await admin.get("/admin/activity?event=password.change");
  t.equal(all.status, 200);
  t.match(await all.text(), /Password changed/);
});
