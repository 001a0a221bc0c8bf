/**
 * A client flooding the auth API past its rate limit is refused without calling better-auth again
 * (src/plugins/auth/refusal-cache.ts): better-auth rebuilds its router for every request, so each refusal
 * used to cost as much as a sign-in's routing, and a flood of them slowed every other user (issue 24).
 * With Redis, better-auth counts every request it sees (refused ones too), so the counter shows whether
 * better-auth was asked.
 */
import { randomUUID } from "node:crypto";
import t from "tap";
import { createRefusalCache } from "../../src/plugins/auth/refusal-cache.js";
import { startTestApp, TEST_SECRET } from "../helpers/app.js";
import { bare, randomClientIp, redisTest } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";

const SIGN_IN_LIMIT = 10;
const attempt = (url: string, ip: string) =>
  bare(
    url,
    "/api/auth/sign-in/email",
    { "content-type": "application/json", "x-forwarded-for": ip },
    {
      method: "POST",
      body: JSON.stringify({ email: `nobody-refusals-${randomUUID()}@example.com`, password: "wrong password!" }),
    },
  );

redisTest(t, "past the limit, refusals are answered without better-auth, as better-auth answers them", async (t) => {
  const { url, redis } = await startTestApp(t, { redis: true, env: { NODE_ENV: "production", BETTER_AUTH_SECRET: TEST_SECRET, TRUST_PROXY: "true" } });
  const ip = randomClientIp();
  const counter = `tether:${ip}|/sign-in/email`;
  t.teardown(() => redis!.del(counter));
  for (let i = 0; i < SIGN_IN_LIMIT; i++) t.equal((await attempt(url, ip)).status, 401);
  const first = await attempt(url, ip);
  t.equal(first.status, 429, "better-auth refuses the eleventh");
  const firstBody = await readJson(first);
  t.equal(await redis!.get(counter), String(SIGN_IN_LIMIT + 1), "better-auth counted every attempt so far");

  for (let i = 0; i < 5; i++) {
    const again = await attempt(url, ip);
    t.equal(again.status, 429);
    t.same(await readJson(again), firstBody, "the same answer");
    t.match(again.headers.get("retry-after"), /^\d+$/, "with Retry-After");
    t.ok(Number(again.headers.get("retry-after")) <= 60, "within the window");
  }
  t.equal(await redis!.get(counter), String(SIGN_IN_LIMIT + 1), "the later refusals never reached better-auth");
  t.equal((await attempt(url, randomClientIp())).status, 401, "another address is not refused");
});

t.test("only better-auth's rate-limit refusal is remembered, and only while it certainly holds", async (t) => {
  let now = 1_000_000;
  const cache = createRefusalCache({ now: () => now, maxEntries: 3 });
  const limited = (retryAfter: string, body = JSON.stringify({ message: "Too many requests. Please try again later." })) =>
    new Response(body, { status: 429, headers: { "content-type": "application/json", "x-retry-after": retryAfter } });

  await cache.remember("a", limited("30", JSON.stringify({ code: "SIGN_IN_LOCKED", message: "Too many failed sign-ins" })));
  t.equal(cache.answer("a"), undefined, "the per-account lockout is not remembered (it is not per address)");
  await cache.remember("a", limited("1"));
  t.equal(cache.answer("a"), undefined, "a refusal ending within a second is left to better-auth");
  await cache.remember("a", new Response("{}", { status: 401 }));
  t.equal(cache.answer("a"), undefined);

  await cache.remember("a", limited("30"));
  const answer = cache.answer("a")!;
  t.equal(answer.status, 429);
  t.equal(answer.headers.get("x-retry-after"), "30");
  t.same(await answer.json(), { message: "Too many requests. Please try again later." });
  now += 28_500;
  t.equal(cache.answer("a")?.headers.get("x-retry-after"), "2", "counting down");
  now += 500;
  t.equal(cache.answer("a"), undefined, "the last second is better-auth's to decide");

  for (const key of ["b", "c", "d", "e"]) await cache.remember(key, limited("30"));
  t.ok(cache.size <= 3, `bounded (${cache.size} kept)`);
  t.ok(cache.answer("e"), "the newest is kept");
});
