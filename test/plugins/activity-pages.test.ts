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

t.test("a cursor past the largest bigint renders a 400 page that says the range, never a 500", async (t) => {
  const { app, url } = await aloneBehindGuard(t, activityPages);
  const admin = await signedUp(url, "admin");
  await makeSiteAdmin(app, admin.userId);
  for (const path of ["/settings/activity", "/admin/activity"]) {
    const response = await admin.get(`${path}?before=9223372036854775808`);
    t.equal(response.status, 400, path);
    t.match(await response.text(), /must be a whole number from 0 to 9223372036854775807/);
    t.equal((await admin.get(`${path}?before=9223372036854775807`)).status, 200, `${path}: the largest cursor`);
  }
});
