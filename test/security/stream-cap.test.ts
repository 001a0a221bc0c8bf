/**
 * Long-lived streams are capped per credential and per user, every kind through the one admission
 * (src/http/stream-limits.ts): MCP notification streams (the attack: one `host:call` token opening
 * hundreds of `GET /mcp`), `/devices` live views and device streams. Past a cap the next one is refused
 * with 429 `TOO_MANY_STREAMS` and `Retry-After`, a stream that ends frees its slot, and other users are
 * not affected. With Redis, the caps span replicas.
 */
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { bearer, cookieOf, mintToken, newUser, redisTest } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";
import { streamOpener, type OpenedStream } from "../helpers/streams.js";
import { pair, protocolHeaders, ScriptedDevice } from "../host/helpers.js";

/** The defaults (src/config/env.ts): what an operator who set nothing gets. */
const PER_CREDENTIAL = 16;

t.test("one token opening many MCP streams: 429 past the cap; another user is not affected", async (t) => {
  const { url } = await startTestApp(t);
  const open = streamOpener(t, url);
  const attacker = await newUser(url, "mcp-streams");
  const token = await mintToken(attacker.client, { scopes: ["host:call"] });

  const answers: OpenedStream[] = [];
  for (let i = 0; i < PER_CREDENTIAL + 4; i++) answers.push(await open("/mcp", bearer(token)));
  t.same(
    answers.map((a) => a.status),
    [...Array(PER_CREDENTIAL).fill(200), 429, 429, 429, 429],
    `${PER_CREDENTIAL} streams open; the rest are refused`,
  );
  const refused = answers.at(-1)!;
  t.match(refused.body, { code: "TOO_MANY_STREAMS", message: /This token already has 16 MCP notification streams open/ }, "{ code, message }");
  t.match(refused.headers["retry-after"], /^\d+$/, "with Retry-After");

  const other = await newUser(url, "mcp-neighbour");
  const theirs = await open("/mcp", bearer(await mintToken(other.client, { scopes: ["host:call"] })));
  t.equal(theirs.status, 200, "another user's stream opens");
  t.equal((await other.client.get("/api/me")).status, 200, "and their requests are answered");
  t.equal((await fetch(`${url}/healthz`)).status, 200, "so is /healthz");

  answers[0]!.close();
  await eventually(
    async () => {
      const retry = await open("/mcp", bearer(token));
      return retry.status === 200;
    },
    10_000,
    "the closed stream's slot to be free again",
  );
});

t.test("/devices live views: the cap per browser session, the refusal as JSON and as a page, a freed slot", async (t) => {
  const { url } = await startTestApp(t);
  const open = streamOpener(t, url);
  const alice = cookieOf((await newUser(url, "streams-alice")).client);
  const bob = cookieOf((await newUser(url, "streams-bob")).client);

  const held: OpenedStream[] = [];
  for (let i = 0; i < PER_CREDENTIAL; i++) held.push(await open("/devices/events", { cookie: alice }));
  t.ok(
    held.every((stream) => stream.status === 200),
    `${PER_CREDENTIAL} live views open`,
  );
  const refused = await open("/devices/events", { cookie: alice, accept: "application/json" });
  t.equal(refused.status, 429, "one more is refused");
  t.match(refused.headers["retry-after"], /^\d+$/);
  t.match(refused.body, { code: "TOO_MANY_STREAMS", message: /This browser session already has 16 live \/devices pages open/ });
  const page = await open("/devices/events", { cookie: alice, accept: "text/html" });
  t.equal(page.status, 429);
  t.match(page.body, /Too many attempts/, "a browser gets a page saying so");

  t.equal((await open("/devices/events", { cookie: bob })).status, 200, "another user is not affected");

  held[0]!.close();
  await eventually(async () => (await open("/devices/events", { cookie: alice })).status === 200, 10_000, "a freed slot");
});

t.test("device streams count against their owner: past STREAMS_PER_USER the next device waits", async (t) => {
  const { url } = await startTestApp(t, { env: { STREAMS_PER_USER: "2" } });
  const open = streamOpener(t, url);
  const owner = await newUser(url, "many-devices");
  const devices: ScriptedDevice[] = [];
  for (let i = 0; i < 3; i++) {
    const { deviceId, token } = await pair(owner.client, `box-${i}`);
    const device = new ScriptedDevice(url, deviceId, token);
    t.equal((await device.hello()).status, 200);
    devices.push(device);
  }
  const streams = [];
  for (const device of devices) streams.push(await open("/api/host/stream", { ...protocolHeaders, authorization: `Bearer ${device.token}` }));
  t.same(
    streams.map((s) => s.status),
    [200, 200, 429],
    "two devices online, the third refused",
  );
  t.match(streams[2]!.body, { code: "TOO_MANY_STREAMS", message: /Your account already has 2 device streams open/ });
  const listed = (await readJson(await owner.client.get("/api/host/devices"))).devices as Array<{ online: boolean }>;
  t.equal(listed.filter((device) => device.online).length, 2, "the refused device is not online");

  streams[0]!.close();
  await eventually(
    async () => (await open("/api/host/stream", { ...protocolHeaders, authorization: `Bearer ${devices[2]!.token}` })).status === 200,
    10_000,
    "the third device to get in once one leaves",
  );
});

redisTest(t, "two replicas sharing Redis: one user's streams count on both", async (t) => {
  const env = { STREAMS_PER_USER: "3" };
  const a = await startTestApp(t, { redis: true, env });
  const b = await startTestApp(t, { redis: true, env, database: a.database });
  const onA = streamOpener(t, a.url);
  const onB = streamOpener(t, b.url);
  const user = await newUser(a.url, "replica-streams");
  const first = await mintToken(user.client, { scopes: ["host:call"] });
  const second = await mintToken(user.client, { scopes: ["host:call"] });

  const held = [await onA("/mcp", bearer(first)), await onA("/mcp", bearer(first)), await onB("/mcp", bearer(second))];
  t.same(
    held.map((s) => s.status),
    [200, 200, 200],
    "three streams, two on one replica and one on the other",
  );
  const refused = await onB("/mcp", bearer(second));
  t.equal(refused.status, 429, "the fourth is refused, though this replica holds only one");
  t.match(refused.body, { code: "TOO_MANY_STREAMS", message: /Your account already has 3 MCP notification streams open/ });

  held[0]!.close();
  await eventually(async () => (await onB("/mcp", bearer(second))).status === 200, 10_000, "a stream closed on one replica to free a slot on the other");
});
