import t from "tap";
import { sessionPages } from "../../src/web/routes/session-pages.js";
import { PASSWORD } from "../helpers/auth.js";
import { TestClient } from "../helpers/client.js";
import { aloneBehindGuard, refusesWithout, showsPage, signedUp } from "./bare.js";

t.test("it declares the form parser its forms post through", (t) => refusesWithout(t, sessionPages, "@fastify/formbody"));

t.test("sessionPages alone behind the guard: see your sessions, sign the others out", async (t) => {
  const { url } = await aloneBehindGuard(t, sessionPages);
  const laptop = await signedUp(url, "sessions");
  const { user } = (await (await laptop.get("/api/auth/get-session")).json()) as { user: { email: string } };
  const phone = new TestClient(url, { headers: { accept: "text/html" } });
  t.equal((await phone.signIn(user.email, PASSWORD)).status, 200);
  const html = await showsPage(t, laptop, "/settings/sessions", "Sessions");
  t.equal((html.match(/action="\/settings\/sessions\/[^/"]+\/revoke"/g) ?? []).length, 2, "both sessions are listed, each with its sign-out");

  const others = await laptop.request("POST", "/settings/sessions/revoke-others");
  t.equal(others.status, 303);
  t.equal(others.headers.get("location"), "/settings/sessions?notice=others");
  t.equal((await phone.get("/settings/sessions")).status, 302, "the other session ended");
  t.equal((await laptop.get("/settings/sessions")).status, 200, "this one did not");
});
