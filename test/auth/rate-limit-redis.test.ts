import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import t from "tap";
import { startTestApp, TEST_SECRET } from "../helpers/app.js";
import { readJson, TestClient } from "../helpers/client.js";
import { openTestDatabase } from "../helpers/database.js";
import { bare, bearer, cookieOf, mintToken, newUser, PASSWORD, randomClientIp, redisTest, whoAmI } from "../helpers/auth.js";

// Rate limiting per client address in production (memory, or Redis shared by instances), and
// deactivation that applies at once with Redis as better-auth's secondary storage.

/** Every app in this file shares one database (they are told apart by their users and addresses). */
const database = await openTestDatabase();
t.teardown(() => database.close());

const PRODUCTION = { NODE_ENV: "production", BETTER_AUTH_SECRET: TEST_SECRET };
/** better-auth's sign-in limit as Tether configures it (create-auth.ts): 10 a minute per address. */
const SIGN_IN_LIMIT = 10;

/**
 * One failed sign-in (no Origin, no cookie: a script), with the given extra headers. Each attempt names another
 * address, so what is measured here is the per-client-address limit alone, never the per-account lockout
 * (test/accounts covers that one).
 */
const attempt = (url: string, headers: Record<string, string> = {}, password = "wrong password!") =>
  bare(
    url,
    "/api/auth/sign-in/email",
    { "content-type": "application/json", ...headers },
    {
      method: "POST",
      body: JSON.stringify({ email: `nobody-ratelimit-${randomUUID()}@example.com`, password }),
    },
  );

/** Makes `count` attempts; returns their statuses. */
async function attempts(count: number, next: (i: number) => Promise<Response>): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    const response = await next(i);
    await response.arrayBuffer();
    statuses.push(response.status);
  }
  return statuses;
}

t.test("production, behind a proxy: one client ends in 429 with Retry-After; another client gets through", async (t) => {
  const { url } = await startTestApp(t, { database, env: { ...PRODUCTION, TRUST_PROXY: "true" } });
  const user = await newUser(url, "limited");
  const ipA = randomClientIp();
  const ipB = randomClientIp();
  const fromA = { "x-forwarded-for": ipA };

  t.strictSame(await attempts(SIGN_IN_LIMIT, () => attempt(url, fromA)), Array(SIGN_IN_LIMIT).fill(401), "within the limit: refused as a wrong password");
  const limited = await attempt(url, fromA);
  t.equal(limited.status, 429, "over the limit: 429");
  const retryAfter = limited.headers.get("retry-after");
  t.match(retryAfter, /^\d+$/, "with a standard Retry-After header");
  t.ok(Number(retryAfter) > 0 && Number(retryAfter) <= 60, `Retry-After within the window (${retryAfter})`);
  t.match(await readJson(limited), { message: String }, "and a message");

  const rightPassword = await attempt(url, { ...fromA, origin: url }, PASSWORD);
  t.equal(rightPassword.status, 429, "even the right password waits (the limit is per address, before credentials)");
  const spoofed = await attempt(url, { ...fromA, "x-tether-client-ip": randomClientIp() });
  t.equal(spoofed.status, 429, "a client-sent x-tether-client-ip does not choose a fresh bucket");

  const other = await attempt(url, { "x-forwarded-for": ipB });
  t.equal(other.status, 401, "another client address is not limited");
  const otherSignIn = await bare(
    url,
    "/api/auth/sign-in/email",
    { "content-type": "application/json", "x-forwarded-for": ipB },
    {
      method: "POST",
      body: JSON.stringify({ email: user.email, password: PASSWORD }),
    },
  );
  t.equal(otherSignIn.status, 200, "and signs in");
});

t.test("production, no trusted proxy: forged X-Forwarded-For and x-tether-client-ip do not give a fresh bucket", async (t) => {
  const { url } = await startTestApp(t, { database, env: PRODUCTION });
  const statuses = await attempts(SIGN_IN_LIMIT + 1, () =>
    attempt(url, { "x-forwarded-for": randomClientIp(), "x-tether-client-ip": randomClientIp(), "x-real-ip": randomClientIp() }),
  );
  t.strictSame(statuses, [...Array(SIGN_IN_LIMIT).fill(401), 429], "every attempt counted against the one real peer address");
});

t.test("outside production there is no rate limit", async (t) => {
  const { url } = await startTestApp(t, { database, env: { NODE_ENV: "development", TRUST_PROXY: "true" } });
  const ip = randomClientIp();
  const statuses = await attempts(SIGN_IN_LIMIT + 3, () => attempt(url, { "x-forwarded-for": ip }));
  t.strictSame(statuses, Array(SIGN_IN_LIMIT + 3).fill(401), `${SIGN_IN_LIMIT + 3} attempts, none limited`);
});

redisTest(t, "two instances share the counters through Redis", async (t) => {
  const env = { ...PRODUCTION, TRUST_PROXY: "true" };
  const one = await startTestApp(t, { database, redis: true, env });
  const two = await startTestApp(t, { database, redis: true, env });
  const ip = randomClientIp();
  const from = { "x-forwarded-for": ip };
  const statuses = await attempts(SIGN_IN_LIMIT, (i) => attempt(i % 2 === 0 ? one.url : two.url, from));
  t.strictSame(statuses, Array(SIGN_IN_LIMIT).fill(401), `${SIGN_IN_LIMIT} attempts split across the two instances`);
  const counter = await one.redis!.get(`tether:${ip}|/sign-in/email`);
  t.equal(counter, String(SIGN_IN_LIMIT), "the counter lives in Redis");
  const onOne = await attempt(one.url, from);
  const onTwo = await attempt(two.url, from);
  t.equal(onOne.status, 429, "the next attempt on instance one is limited");
  t.equal(onTwo.status, 429, "and on instance two");
  t.match(onTwo.headers.get("retry-after"), /^\d+$/);
  t.equal((await attempt(two.url, { "x-forwarded-for": randomClientIp() })).status, 401, "another address is not");
});

redisTest(t, "with Redis on, deactivation applies at once, everywhere", async (t) => {
  const { url, app } = await startTestApp(t, { database, redis: true });
  const admin = await newUser(url, "redis-admin", { adminOf: app });
  const user = await newUser(url, "redis-user");
  const token = await mintToken(user.client);
  const cookie = { cookie: cookieOf(user.client) };

  t.equal((await user.client.get("/api/me")).status, 200, "signed in");
  t.match(await readJson(await bare(url, "/api/auth/get-session", cookie)), { user: { id: user.id } }, "better-auth sees the session");
  t.equal((await whoAmI(url, bearer(token))).status, 200, "the token works");

  const deactivate = await admin.client.post(`/api/admin/users/${user.id}/deactivate`);
  t.equal(deactivate.status, 200, "the admin deactivates the user");
  t.equal((await bare(url, "/api/me", cookie)).status, 401, "the very next request with the old cookie is anonymous");
  t.equal(await readJson(await bare(url, "/api/auth/get-session", cookie)), null, "better-auth's own get-session: null");
  t.equal((await whoAmI(url, bearer(token))).status, 401, "the user's token: anonymous");
  const listed = await readJson(await admin.client.get("/api/admin/users"));
  t.ok(listed.users.find((u: { id: string }) => u.id === user.id).deactivatedAt, "listed as deactivated");
  const refused = await new TestClient(url).signIn(user.email);
  t.equal(refused.status, 403, "sign-in refused");

  t.equal((await admin.client.post(`/api/admin/users/${user.id}/reactivate`)).status, 200, "reactivated");
  const again = new TestClient(url);
  t.equal((await again.signIn(user.email)).status, 200, "the user can sign in again");
  t.match(await readJson(await again.get("/api/me")), { user: { id: user.id }, via: "cookie" });
  t.equal((await bare(url, "/api/me", cookie)).status, 401, "the cookie from before stays dead");
  const rows = await sql<{ n: string }>`select count(*) as n from "session" where "userId" = ${user.id}`.execute(database.db);
  t.equal(Number(rows.rows[0]!.n), 1, "only the new session exists");
});
