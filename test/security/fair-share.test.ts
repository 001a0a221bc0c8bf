/**
 * A fair share for every user (src/http/fair-share.ts, issue 24: no user's heavy use slows another): at
 * most CONCURRENT_REQUESTS_PER_CREDENTIAL of one user's requests are worked on at once, the rest wait their
 * turn in order, and another user's requests never wait behind them. A request waiting for its device
 * holds no slot, and a client that leaves while it waits gives its turn back.
 *
 * The slow requests are a route of the test's own (registered before the server listens) whose handler
 * waits until the test lets it go, so "in progress" is exact, not a matter of timing.
 */
import { createHash } from "node:crypto";
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { readJson } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";
import { connectedDevice, signedIn } from "../host/helpers.js";

const PER_USER = 2;

/** Handlers of `GET /test/held` that have started, each waiting for its release. */
const started: Array<() => void> = [];
const { app, url } = await startTestApp(t, {
  env: { CONCURRENT_REQUESTS_PER_CREDENTIAL: String(PER_USER) },
  beforeListen: (app) => {
    app.get("/test/held", async (request) => {
      await request.requireSession();
      await new Promise<void>((resolve) => started.push(resolve));
      return { ok: true };
    });
  },
});
/**
 * The lane of a signed-in browser: its session token (the signed cookie's value before the signature), as the
 * plugin keys it without asking the database.
 */
const laneOf = (person: { cookieHeader: string }) => {
  const cookie = person.cookieHeader.split(/;\s*/).find((part) => part.includes("session_token="));
  const value = decodeURIComponent(cookie?.slice(cookie.indexOf("=") + 1) ?? "");
  return `session:${createHash("sha256")
    .update(value.slice(0, value.lastIndexOf(".")))
    .digest("base64url")}`;
};
const releaseAll = () => started.splice(0).forEach((release) => release());

t.test("one user's requests beyond the share wait their turn; another user's do not wait behind them", async (t) => {
  const mallory = await signedIn(url);
  const bob = await signedIn(url);
  const key = laneOf(mallory);
  const held = Array.from({ length: 6 }, () => mallory.get("/test/held"));
  // The two admitted requests still resolve their session before reaching the handler: wait for both.
  await eventually(() => app.tetherFairShare.load(key).waiting === 4 && started.length >= PER_USER, 10_000, "four of her requests waiting");
  t.equal(started.length, PER_USER, `only ${PER_USER} of her 6 requests are being worked on`);
  t.same(app.tetherFairShare.load(key), { active: PER_USER, waiting: 4 });

  const me = await bob.get("/api/me");
  t.equal(me.status, 200, "Bob is answered while Mallory's requests wait");
  t.equal((await readJson(me)).user.id, bob.userId);

  // Released two at a time, her requests are worked on in turn, never more than the share at once.
  const answered: number[] = [];
  for (let round = 0; round < 3; round++) {
    await eventually(() => started.length === PER_USER, 10_000, `round ${round}: ${PER_USER} in progress`);
    releaseAll();
  }
  for (const response of await Promise.all(held)) answered.push(response.status);
  t.same(answered, [200, 200, 200, 200, 200, 200]);
  await eventually(() => app.tetherFairShare.load(key).active === 0, 10_000, "her lane empty");
});

t.test("a client that leaves while it waits gives its turn back", async (t) => {
  const mallory = await signedIn(url);
  const key = laneOf(mallory);
  const held = Array.from({ length: PER_USER }, () => mallory.get("/test/held"));
  await eventually(() => started.length === PER_USER, 10_000, "her share in progress");
  const leaving = new AbortController();
  const left = fetch(`${url}/test/held`, { headers: { cookie: mallory.cookieHeader }, signal: leaving.signal }).catch((error: Error) => error.name);
  await eventually(() => app.tetherFairShare.load(key).waiting === 1, 10_000, "the third waiting");
  leaving.abort();
  t.equal(await left, "AbortError");
  await eventually(() => app.tetherFairShare.load(key).waiting === 0, 10_000, "the third out of the queue");
  releaseAll();
  t.same(
    (await Promise.all(held)).map((response) => response.status),
    [200, 200],
  );
  await eventually(() => app.tetherFairShare.load(key).active === 0 && app.tetherFairShare.load(key).waiting === 0, 10_000, "her lane empty");
  t.equal(started.length, 0, "the request whose client left never reached its handler");
});

t.test("a call waiting for its device holds no slot: more calls than the share reach the device", async (t) => {
  const { owner, deviceId, device } = await connectedDevice(t, url, "fair");
  const calls = Array.from({ length: PER_USER + 2 }, (_, i) => owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: `f${i}` } }));
  const received = [];
  for (let i = 0; i < PER_USER + 2; i++) received.push(await device.nextCall());
  t.equal(received.length, PER_USER + 2, "every call reached the device at once");
  const me = await owner.get("/api/me");
  t.equal(me.status, 200, "the same user's other requests are answered meanwhile");
  for (const call of received) await device.postResult({ id: call.id, ok: true, result: { size: 1 } });
  t.same(
    (await Promise.all(calls)).map((response) => response.status),
    [200, 200, 200, 200],
  );
  await eventually(() => app.tetherFairShare.load(laneOf(owner)).active === 0, 10_000, "the lane empty");
});
