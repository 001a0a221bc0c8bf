import { connect, type Socket } from "node:net";
import t from "tap";
import { startTestApp } from "../../helpers/app.js";
import { connectedDevice } from "../../host/helpers.js";
import type { FastifyInstance } from "fastify";
import { eventually } from "../../helpers/eventually.js";
import { sleep } from "../../helpers/services.js";

/**
 * Slow clients hold nothing for long: a body trickled a byte at a time is cut off by the request
 * timeout, slow headers by the headers timeout, an idle keep-alive connection by its timeout, and
 * connections beyond the cap are refused. Event streams are long-lived by design and outlive all of it.
 * The bounds are set low here (the defaults are in src/config/env.ts) so the test is short.
 */
const LIMITS = {
  REQUEST_TIMEOUT_MS: "2000",
  HEADERS_TIMEOUT_MS: "1000",
  CONNECTION_TIMEOUT_MS: "1500",
  KEEP_ALIVE_TIMEOUT_MS: "1000",
};
/** Node checks the request and headers timeouts once a second (app.ts); the rest is room for a loaded machine. */
const CHECK_INTERVAL_MS = 1_000;
const SLACK_MS = 4_000;

/** A raw connection; resolves its close time (ms after opening) once the server ends it. */
function rawConnection(port: number): { socket: Socket; closed: Promise<number> } {
  const opened = Date.now();
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => {});
  socket.resume();
  const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(Date.now() - opened)));
  return { socket, closed };
}

const portOf = (url: string) => Number(new URL(url).port);

/** The connections the server holds now. */
const connectionsOf = (app: FastifyInstance) =>
  new Promise<number>((resolve, reject) => app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));

t.test("a body trickled a byte at a time is cut off by the request timeout", async (t) => {
  const { app, url } = await startTestApp(t, { env: LIMITS });
  const rssBefore = process.memoryUsage().rss;
  const slow = Array.from({ length: 50 }, () => {
    const connection = rawConnection(portOf(url));
    connection.socket.write(`POST /api/tokens HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
    const trickle = setInterval(() => connection.socket.writable && connection.socket.write(" "), 250);
    void connection.closed.then(() => clearInterval(trickle));
    t.teardown(() => {
      clearInterval(trickle);
      connection.socket.destroy();
    });
    return connection;
  });

  await eventually(async () => (await connectionsOf(app)) >= 50, 10_000, "the server to hold the 50 slow connections");
  const started = Date.now();
  const health = await fetch(`${url}/healthz`);
  const latency = Date.now() - started;
  t.equal(health.status, 200, "a legitimate request succeeds meanwhile");
  t.ok(latency < 2_000, `and promptly (${latency} ms)`);

  const closedAfter = await Promise.all(slow.map((c) => c.closed));
  const worst = Math.max(...closedAfter);
  const bound = Number(LIMITS.REQUEST_TIMEOUT_MS) + CHECK_INTERVAL_MS + SLACK_MS;
  t.ok(worst <= bound, `all 50 closed by the server, the last after ${worst} ms (bound ${bound} ms)`);
  const grown = (process.memoryUsage().rss - rssBefore) / 1024 / 1024;
  t.ok(grown < 100, `memory grew ${grown.toFixed(1)} MB`);
});

t.test("slow headers are cut off by the headers timeout; idle keep-alive connections close", async (t) => {
  const { url } = await startTestApp(t, { env: LIMITS });
  const slowHeaders = rawConnection(portOf(url));
  slowHeaders.socket.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\n");
  const dribble = setInterval(() => slowHeaders.socket.writable && slowHeaders.socket.write("X-Slow: 1\r\n"), 200);
  t.teardown(() => clearInterval(dribble));
  const headersClosed = await slowHeaders.closed;
  clearInterval(dribble);
  const headersBound = Number(LIMITS.HEADERS_TIMEOUT_MS) + CHECK_INTERVAL_MS + SLACK_MS;
  t.ok(headersClosed <= headersBound, `closed after ${headersClosed} ms (bound ${headersBound} ms)`);

  const idle = rawConnection(portOf(url));
  let answered = "";
  idle.socket.on("data", (chunk: Buffer) => (answered += chunk.toString()));
  idle.socket.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n");
  const idleClosed = await idle.closed;
  t.match(answered, /^HTTP\/1\.1 200/, "the request was answered");
  const idleBound = Number(LIMITS.KEEP_ALIVE_TIMEOUT_MS) + SLACK_MS;
  t.ok(idleClosed <= idleBound, `the idle keep-alive connection closed after ${idleClosed} ms (bound ${idleBound} ms)`);
});

t.test("connections beyond the cap are refused; the server serves again once they go", async (t) => {
  const cap = 10;
  const { app, url } = await startTestApp(t, { env: { ...LIMITS, HEADERS_TIMEOUT_MS: "20000", REQUEST_TIMEOUT_MS: "20000", MAX_CONNECTIONS: String(cap) } });
  const held = Array.from({ length: cap }, () => rawConnection(portOf(url)));
  await eventually(async () => (await connectionsOf(app)) === cap, 10_000, "the server to hold the connections within the cap");
  const extra = Array.from({ length: 5 }, () => rawConnection(portOf(url)));
  const refusedAfter = await Promise.all(extra.map((c) => c.closed));
  t.ok(Math.max(...refusedAfter) < SLACK_MS, `the ${extra.length} over the cap are closed at once`);
  let heldOpen = 0;
  for (const connection of held) if (!connection.socket.destroyed) heldOpen++;
  t.equal(heldOpen, cap, "the ones within the cap stay open");
  for (const connection of held) connection.socket.destroy();
  await Promise.all(held.map((c) => c.closed));
  await eventually(async () => (await connectionsOf(app)) === 0, 10_000, "the server to let the connections go");
  t.equal((await fetch(`${url}/healthz`)).status, 200, "served again");
});

t.test("event streams outlive every timeout", async (t) => {
  // fetch's connection pool reuses idle connections: with a 1 s keep-alive timeout, one the server is
  // closing that very moment now and then takes the next request. 5 s is still well under the wait.
  const { url } = await startTestApp(t, { env: { ...LIMITS, KEEP_ALIVE_TIMEOUT_MS: "5000" } });
  const { owner, deviceId, device } = await connectedDevice(t, url);

  const live = await fetch(`${url}/devices/events`, { headers: { cookie: owner.cookieHeader } });
  t.equal(live.status, 200, "the /devices live stream opens");
  const reader = live.body!.getReader();
  t.teardown(() => reader.cancel().catch(() => {}));
  let liveEnded = false;
  void (async () => {
    while (!(await reader.read()).done);
    liveEnded = true;
  })().catch(() => (liveEnded = true));

  // Longer than the request, headers, connection and keep-alive timeouts together.
  await sleep(7_000);
  t.notOk(device.ended, "the device stream is still open");
  t.notOk(liveEnded, "the live stream is still open");
  const listed = (await (await owner.get("/api/host/devices")).json()) as { devices: Array<{ id: string; online: boolean }> };
  t.match(listed.devices, [{ id: deviceId, online: true }], "the device is still online");
});
