import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { redisTest } from "../helpers/auth.js";
import { openTestDatabase } from "../helpers/database.js";
import { readJson, uniqueEmail } from "../helpers/client.js";
import { browserClient, HTMX_HEADERS, textOf } from "../pages/support.js";
import { protocolHeaders } from "./helpers.js";
import { eventually } from "../helpers/eventually.js";

/**
 * RFC 8628 device authorization over real HTTP, as tether-host speaks it (the executable itself is
 * driven in device-flow-e2e.test.ts): asking for a code, the approval page, polling, the credential.
 */

const GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const device = { client_id: "tether-host", device_name: "build-box", device_platform: "linux-x64", device_version: "0.1.0" };

async function post(url: string, path: string, body: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  const response = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: response.status, headers: response.headers, body: await readJson(response) };
}

const askForCode = (url: string, body: unknown = device) => post(url, "/api/auth/device/code", body);
const poll = (url: string, deviceCode: string) =>
  post(url, "/api/auth/device/credential", { grant_type: GRANT, device_code: deviceCode, client_id: "tether-host" });

async function owner(url: string) {
  const client = browserClient(url);
  await client.signUp(uniqueEmail("device-flow"));
  return client;
}

/** One server for the tests that need no settings of their own; each uses owners of its own. */
const shared = await startTestApp(t, { env: { DEVICE_POLL_INTERVAL: "1s" } });

t.test("a device asks, the owner approves on /device, the device gets its own dt_ credential once", async (t) => {
  const server = shared;
  const asked = await askForCode(server.url);
  t.equal(asked.status, 200);
  const { device_code, user_code, verification_uri, verification_uri_complete, interval, expires_in } = asked.body;
  t.match(user_code, /^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{8}$/, "8 characters, no 0/O/1/I");
  t.equal(verification_uri, `${server.url}/device`);
  t.equal(verification_uri_complete, `${server.url}/device?user_code=${user_code}`);
  t.equal(interval, 1);
  t.ok(expires_in > 500 && expires_in <= 600, "about 10 minutes");
  t.equal(asked.headers.get("cache-control"), "no-store");

  t.match((await poll(server.url, device_code)).body, { error: "authorization_pending" });
  t.match((await poll(server.url, device_code)).body, { error: "slow_down" }, "polling faster than the interval");

  // better-auth's own token endpoint issues no session for a tether-host code.
  const token = await post(server.url, "/api/auth/device/token", { grant_type: GRANT, device_code, client_id: "tether-host" });
  t.equal(token.status, 400);
  t.notOk(token.body.access_token);

  // The page needs a session.
  const anonymous = await browserClient(server.url).get(`/device?user_code=${user_code}`);
  t.equal(anonymous.status, 302);
  t.match(anonymous.headers.get("location"), /^\/login/);

  const alice = await owner(server.url);
  // Lower case and with a separator: the same code.
  const typed = `${user_code.slice(0, 4).toLowerCase()}-${user_code.slice(4).toLowerCase()}`;
  const page = await alice.get(`/device?user_code=${typed}`);
  t.equal(page.status, 200);
  const text = textOf(await page.text());
  t.match(text, "Device name The device calls itself “build-box”");
  t.match(text, "Platform linux-x64");
  t.match(text, "Version tether-host 0.1.0");
  t.match(text, /Requested from (127\.0\.0\.1|::1|::ffff:127\.0\.0\.1)/);
  t.match(text, /Requested at \d+ \w+ \d{4}, \d\d:\d\d UTC \(less than a minute ago\)/);
  t.match(text, "(your network)");
  t.notMatch(text, /Warning|claims to be your own machine|This request was made/, "from the owner's own network, just now, an ordinary name: no warning");

  // Someone else's account cannot see or decide it once Alice opened it.
  const mallory = await owner(server.url);
  const other = await mallory.get(`/device?user_code=${user_code}`);
  t.equal(other.status, 400);
  t.notMatch(await other.text(), "build-box");

  const approved = await alice.request("POST", "/device/approve", { form: { user_code: typed }, headers: HTMX_HEADERS });
  t.equal(approved.status, 200);
  t.match(textOf(await approved.text()), "Device approved");

  let credential: any;
  await eventually(
    async () => {
      const answer = await poll(server.url, device_code);
      if (answer.status === 200) credential = answer.body;
      return answer.status === 200;
    },
    10_000,
    "the credential",
  );
  t.match(credential, { access_token: /^dt_[A-Za-z0-9_-]{43}$/, token_type: "Bearer", device_id: String });
  t.match((await poll(server.url, device_code)).body, { error: "invalid_grant" }, "the code is spent");

  const hello = await fetch(`${server.url}/api/host/hello`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${credential.access_token}`, ...protocolHeaders },
    body: JSON.stringify({ tools: [], roots: ["/tmp"] }),
  });
  t.equal(hello.status, 200, "the credential is a device credential");
  const devices = await readJson(await alice.get("/api/host/devices"));
  t.match(devices, { devices: [{ id: credential.device_id, name: "build-box", platform: "linux-x64" }] });

  const reused = await alice.get(`/device?user_code=${user_code}`);
  t.equal(reused.status, 400, "single use");
});

t.test("the approval page warns about another network, an old request and a name posing as the owner's machine", async (t) => {
  // Behind a proxy (TRUST_PROXY), as a deployment is: the device's address is the one its request was sent from.
  const server = await startTestApp(t, { env: { TRUST_PROXY: "true" } });
  const response = await fetch(`${server.url}/api/auth/device/code`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": "203.0.113.9" },
    body: JSON.stringify({ ...device, device_name: "MacBook Pro (this computer)" }),
  });
  const { user_code } = await readJson(response);
  const erin = await owner(server.url);
  const page = await erin.get(`/device?user_code=${user_code}`);
  t.equal(page.status, 200);
  const html = await page.text();
  const text = textOf(html);
  t.match(html, /<div class="alert alert-error" role="alert" id="device-network-warning">/, "a prominent warning");
  t.match(
    text,
    /Warning: this request came from a different network than yours\. The device asked from 203\.0\.113\.9 ?; you are at (127\.0\.0\.1|::1|::ffff:127\.0\.0\.1) ?\./,
  );
  t.match(text, "The name “MacBook Pro (this computer)” claims to be your own machine.");
  t.match(text, "Device name The device calls itself “MacBook Pro (this computer)” (a name chosen by whoever started it, not checked by Tether)");
  t.notMatch(text, /Device name MacBook/, "never shown as a plain fact");
  t.match(text, "(less than a minute ago)");
  t.notMatch(text, "This request was made", "not old yet");

  // Five minutes later (the code lives ten): the age says so, with a warning.
  await server.database.db
    .updateTable("deviceCode" as never)
    .set({ requestedAt: new Date(Date.now() - 5 * 60_000) } as never)
    .execute();
  const later = textOf(await (await erin.get(`/device?user_code=${user_code}`)).text());
  t.match(later, "This request was made 5 minutes ago.");
  t.match(later, /Requested at .* UTC \(5 minutes ago\)/);
});

t.test("a denied request ends with access_denied; codes are refused for other clients and bad input", async (t) => {
  const server = shared;
  t.match((await askForCode(server.url, { ...device, client_id: "someone-else" })).body, { error: "invalid_client" });
  t.equal((await askForCode(server.url, { client_id: "tether-host" })).status, 200, "name, platform and version are optional");
  t.equal((await askForCode(server.url, { ...device, device_name: "x".repeat(101) })).status, 400);

  const { device_code, user_code } = (await askForCode(server.url)).body;
  const bob = await owner(server.url);
  t.equal((await bob.get(`/device?user_code=${user_code}`)).status, 200);
  const denied = await bob.request("POST", "/device/deny", { form: { user_code } });
  t.equal(denied.status, 200);
  t.match(textOf(await denied.text()), "Request denied");
  let answer: any;
  await eventually(async () => (answer = (await poll(server.url, device_code)).body).error !== "slow_down", 10_000, "a verdict");
  t.match(answer, { error: "access_denied" });
  t.same((await readJson(await bob.get("/api/host/devices"))).devices, [], "no device was made");

  const unknown = await bob.get("/device?user_code=ZZZZ-ZZZZ");
  t.equal(unknown.status, 400);
  t.match(textOf(await unknown.text()), "That code is not valid");
  t.equal((await bob.get(`/device?user_code=${"%00".repeat(30)}`)).status, 400, "junk is a clear 400");
});

t.test("a code nobody approves expires: expired_token", async (t) => {
  const server = await startTestApp(t, { env: { DEVICE_CODE_EXPIRES_IN: "2s", DEVICE_POLL_INTERVAL: "1s" } });
  const { device_code, user_code } = (await askForCode(server.url)).body;
  // Polled at the interval the server asks for (a faster poll is told slow_down), until the code's two seconds are up.
  let answer: any;
  await eventually(async () => (answer = (await poll(server.url, device_code)).body).error === "expired_token", 15_000, "expiry", 1_100);
  t.match(answer, { error: "expired_token" });
  const carol = await owner(server.url);
  const late = await carol.get(`/device?user_code=${user_code}`);
  t.equal(late.status, 400);
  t.match(textOf(await late.text()), /expired|not valid/);
});

t.test("typing wrong codes is rate-limited per account", async (t) => {
  const server = shared;
  const dave = await owner(server.url);
  const statuses: number[] = [];
  for (let i = 0; i < 12; i++) statuses.push((await dave.get(`/device?user_code=WRNG-CD${i % 10}X`)).status);
  t.same(statuses.slice(0, 10), Array(10).fill(400));
  t.equal(statuses[11], 429);
});

redisTest(t, "with Redis, wrong codes count across replicas: the limit is the account's, not each process's", async (t) => {
  const database = await openTestDatabase();
  t.teardown(() => database.close());
  const one = await startTestApp(t, { database, redis: true });
  const two = await startTestApp(t, { database, redis: true });
  const erin = await owner(one.url);
  const onTwo = browserClient(two.url);
  for (const [name, value] of erin.cookies) onTwo.cookies.set(name, value);
  const statuses: number[] = [];
  for (let i = 0; i < 11; i++) statuses.push((await (i % 2 === 0 ? erin : onTwo).get(`/device?user_code=WRNG-CD${i % 10}X`)).status);
  t.same(statuses.slice(0, 10), Array(10).fill(400), "ten wrong codes, split across two replicas");
  t.equal(statuses[10], 429, "the eleventh is refused");
  t.equal((await erin.get("/device?user_code=WRNG-CDZX")).status, 429, "on either replica");
});
