import t from "tap";
import { PASSWORD } from "../../helpers/auth.js";
import { TestClient, uniqueEmail } from "../../helpers/client.js";
import { startOwnRedis } from "../../helpers/redis-server.js";
import { chaosUnavailable, startServerProcess } from "../../helpers/services.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * Redis (rate-limit and lockout counters) dies under a production server, then comes back. Sign-in
 * answers a clear 503 quickly, never a 500 or a hang; sign-out still ends the session and clears the
 * cookie; the process lives; sign-in works again once Redis is back.
 */
t.test("Redis down during sign-in and sign-out", { skip: chaosUnavailable() }, async (t) => {
  const redis = await startOwnRedis(t, { stopSignal: "SIGKILL" }); // Redis crashes
  const server = await startServerProcess(t, { NODE_ENV: "production", REDIS_URL: redis.url });
  const { url } = server;

  const email = uniqueEmail("redis-chaos");
  const signedIn = new TestClient(url);
  await signedIn.signUp(email);
  t.equal((await signedIn.get("/api/me")).status, 200, "signed in while Redis is up");

  await redis.stop();

  await t.test("sign-in: a clear 503, quickly", async (t) => {
    const started = Date.now();
    const response = await new TestClient(url).signIn(email);
    const took = Date.now() - started;
    t.equal(response.status, 503, "503, not a 500");
    t.match(await response.json(), { code: "RATE_LIMIT_UNAVAILABLE", message: String }, "with { code, message }");
    t.ok(took < 15_000, `answered in ${took} ms (Redis commands time out after 2 s)`);

    const page = await new TestClient(url).request("POST", "/login", { form: { email, password: PASSWORD }, headers: { accept: "text/html" } });
    t.equal(page.status, 503, "the sign-in page: 503");
    t.match(await page.text(), /Temporarily unavailable/, "with a rendered message");
  });

  await t.test("entering a device code: a clear 503, never unlimited guessing", async (t) => {
    const page = await signedIn.get("/device?user_code=ABCD-EFGH", { accept: "text/html" });
    t.equal(page.status, 503, "the /device page cannot count wrong codes, so it takes none");
    t.match(await page.text(), /Temporarily unavailable/, "with a rendered message");
  });

  await t.test("sign-out still ends the session and clears the cookie", async (t) => {
    const oldCookie = signedIn.cookieHeader;
    const response = await signedIn.post("/api/auth/sign-out");
    t.equal(response.status, 200, "sign-out answers 200");
    t.ok(
      response.headers.getSetCookie().some((c) => /^(__Secure-)?better-auth\.session_token=;/.test(c) && /max-age=0/i.test(c)),
      "the cookie is cleared",
    );
    const replay = await fetch(`${url}/api/me`, { headers: { cookie: oldCookie } });
    t.equal(replay.status, 401, "the old cookie no longer works: the session row is gone");
  });

  t.ok(server.alive(), "the process is alive through the outage");

  await redis.start();
  await eventually(async () => (await new TestClient(url).signIn(email)).status === 200, 30_000, "sign-in to work again once Redis is back", 500);
  t.ok(server.alive(), "the process is alive");
  t.match(server.output(), /redis/i, "the outage was logged");
});
