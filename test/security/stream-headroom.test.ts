/**
 * Long-lived streams of every kind together never take the connections ordinary requests need: with
 * `MAX_CONNECTIONS` small, streams fill up to `MAX_CONNECTIONS - STREAM_RESERVED_CONNECTIONS`, the next
 * one is refused with 503 `STREAMS_AT_CAPACITY` (and its connection closed), and `/healthz`, the sign-in
 * page, signing in and the API still answer. Before, the streams took every connection and every other
 * client was reset.
 */
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { bearer, cookieOf, mintToken, newUser, PASSWORD } from "../helpers/auth.js";
import { eventually } from "../helpers/eventually.js";
import { requestOnce, streamOpener, type OpenedStream } from "../helpers/streams.js";
import { pair, protocolHeaders, ScriptedDevice } from "../host/helpers.js";

const MAX_CONNECTIONS = 24;
const RESERVED = 6;
const ROOM = MAX_CONNECTIONS - RESERVED;

t.test("streams of every kind fill their room; health checks, sign-in and the API still get through", async (t) => {
  const { url } = await startTestApp(t, { env: { MAX_CONNECTIONS: String(MAX_CONNECTIONS), STREAM_RESERVED_CONNECTIONS: String(RESERVED) } });
  const open = streamOpener(t, url);
  const attacker = await newUser(url, "headroom-attacker");
  const tokens = [await mintToken(attacker.client, { scopes: ["host:call"] }), await mintToken(attacker.client, { scopes: ["host:call"] })];
  const viewer = await newUser(url, "headroom-viewer");
  const deviceTokens: string[] = [];
  for (let i = 0; i < 5; i++) {
    const { deviceId, token } = await pair(attacker.client, `headroom-${i}`);
    t.equal((await new ScriptedDevice(url, deviceId, token).hello()).status, 200);
    deviceTokens.push(token);
  }

  const held: OpenedStream[] = [];
  for (const token of deviceTokens) held.push(await open("/api/host/stream", { ...protocolHeaders, authorization: `Bearer ${token}` }));
  for (let i = 0; i < 5; i++) held.push(await open("/devices/events", { cookie: cookieOf(viewer.client) }));
  for (let i = 0; i < ROOM - 10; i++) held.push(await open("/mcp", bearer(tokens[0]!)));
  t.ok(
    held.every((stream) => stream.status === 200),
    `${ROOM} streams open: 5 devices, 5 live views, ${ROOM - 10} MCP streams`,
  );

  // More than the server has connections: before, these took the last of them.
  const refused: OpenedStream[] = [];
  for (let i = 0; i < MAX_CONNECTIONS; i++) refused.push(await open("/mcp", bearer(tokens[1]!)));
  t.ok(
    refused.every((stream) => stream.status === 503),
    `all ${MAX_CONNECTIONS} further streams refused with 503`,
  );
  t.match(refused[0]!.body, { code: "STREAMS_AT_CAPACITY", message: String });
  t.match(refused[0]!.headers["retry-after"], /^\d+$/, "with Retry-After");
  t.equal(refused[0]!.headers.connection, "close", "and the connection closed");
  const liveView = await open("/devices/events", { cookie: cookieOf(viewer.client), accept: "application/json" });
  t.match(liveView, { status: 503, body: { code: "STREAMS_AT_CAPACITY" } }, "every kind shares the room");

  t.equal((await requestOnce(`${url}/healthz`)).status, 200, "/healthz answers");
  t.equal((await requestOnce(`${url}/login`, { headers: { accept: "text/html" } })).status, 200, "the sign-in page answers");
  const signIn = await requestOnce(`${url}/api/auth/sign-in/email`, { method: "POST", json: { email: viewer.email, password: PASSWORD } });
  t.equal(signIn.status, 200, "signing in works");
  t.equal((await requestOnce(`${url}/api/me`, { headers: { cookie: cookieOf(viewer.client) } })).status, 200, "so does the API");

  held[0]!.close();
  await eventually(async () => (await open("/mcp", bearer(tokens[1]!))).status === 200, 10_000, "a stream that ends to make room for another");
});
