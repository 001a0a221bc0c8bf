/**
 * Two app instances on one database (two replicas): a session revoked on /settings/sessions of one
 * fails its very next request on the other, whose session cache hears of it from the database
 * (the trigger on `session` and LISTEN/NOTIFY), with no cache time-out involved.
 */
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { afterSqlChange, PASSWORD, redisTest } from "../helpers/auth.js";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import { browserClient } from "../pages/support.js";

const first = await startTestApp(t);
const second = await startTestApp(t, { database: first.database });

t.test("revoked on one replica, refused on the next request to the other", async (t) => {
  const email = uniqueEmail("replica");
  const owner = browserClient(first.url);
  await owner.signUp(email, PASSWORD, "Replica");

  // The other browser signs in on the second replica, which caches its session by using it.
  const laptop = browserClient(second.url, { headers: { "user-agent": "Mozilla/5.0 (X11; Linux x86_64; rv:131.0) Gecko/20100101 Firefox/131.0" } });
  t.equal((await laptop.request("POST", "/login", { form: { email, password: PASSWORD } })).headers.get("location"), "/home");
  t.equal((await laptop.get("/home")).status, 200);
  t.equal((await laptop.get("/home")).status, 200, "served from the second replica's cache");

  const html = await (await owner.get("/settings/sessions")).text();
  const laptopRow = /<tr data-session-id="([^"]+)">\s*<td class="nowrap">Firefox/.exec(html)?.[1];
  t.ok(laptopRow, "the laptop's session is listed on the first replica");
  const revoked = await owner.request("POST", `/settings/sessions/${laptopRow}/revoke`, { form: {} });
  t.equal(revoked.headers.get("location"), "/settings/sessions?notice=revoked");

  // PGlite delivers the notification before the DELETE returns; a PostgreSQL server a moment later.
  const status = await afterSqlChange(
    async () => (await laptop.get("/home")).headers.get("location"),
    (location) => location === "/login",
  );
  t.equal(status, "/login", "the second replica refuses the revoked session");
});

redisTest(t, "with Redis, failed sign-ins on one replica lock the account on the other", async (t) => {
  const env = { SIGN_IN_LOCKOUT_ATTEMPTS: "2", SIGN_IN_LOCKOUT_SECONDS: "600" };
  const a = await startTestApp(t, { redis: true, env });
  const b = await startTestApp(t, { redis: true, env, database: a.database });
  const email = uniqueEmail("shared-lock");
  await new TestClient(a.url).signUp(email, PASSWORD);
  for (let i = 0; i < 2; i++) t.equal((await new TestClient(a.url).signIn(email, "wrong password")).status, 401);
  const onOther = await new TestClient(b.url).signIn(email, PASSWORD);
  t.equal(onOther.status, 429, "the other replica refuses the right password too");
  t.equal((await readJson(onOther)).code, "SIGN_IN_LOCKED");
});
