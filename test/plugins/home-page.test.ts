import t from "tap";
import { homePage } from "../../src/web/routes/home-page.js";
import { makeSiteAdmin } from "../helpers/auth.js";
import { aloneBehindGuard, refusesWithout, showsPage, signedUp } from "./bare.js";

t.test("it declares the renderer it draws the page with", (t) => refusesWithout(t, homePage, "tether-page-render"));

t.test("homePage alone behind the guard: the signed-in user's landing page", async (t) => {
  const { app, url } = await aloneBehindGuard(t, homePage);
  const member = await signedUp(url, "Ada Lovelace");
  await app.tetherApiTokens.create({ userId: member.userId, name: "ci" });
  const html = await showsPage(t, member, "/home", "Welcome, Ada Lovelace");
  t.match(html, "You have 1 token.");
  t.match(html, ">AL<", "the account badge shows the initials");
  t.notMatch(html, "Manage users", "members see no user management");

  await makeSiteAdmin(app, member.userId);
  t.match(await (await member.get("/home")).text(), /Manage users/, "a site admin sees it");
});
