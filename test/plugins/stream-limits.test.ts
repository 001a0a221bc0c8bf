/**
 * `streamLimitsPlugin` alone on a bare Fastify, with a stream route of the test's own (as a plugin that
 * serves streams uses it): caps per credential and per user (each kind apart), the bound on all streams
 * together below `maxConnections`, the refusals' shape, slots freed when streams end; with Redis, the
 * caps shared by two instances, a crashed holder's leases draining, and an outage that neither refuses
 * nor leaves counts stuck.
 */
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { FastifyInstance } from "fastify";
import { Redis } from "ioredis";
import t, { type Test } from "tap";
import { streamLimitsPlugin, type StreamKind, type StreamLimitsOptions } from "../../src/http/stream-limits.js";
import { redisTest } from "../helpers/auth.js";
import { TEST_REDIS_URL } from "../helpers/database.js";
import { eventually } from "../helpers/eventually.js";
import { startOwnRedis } from "../helpers/redis-server.js";
import { holdStreams } from "../helpers/stream-holder.js";
import { requestOnce, streamOpener } from "../helpers/streams.js";
import { alone, refusesWithout } from "./bare.js";

/**
 * A stream as the host and MCP plugins hold one: admitted, hijacked, released when the client goes, and
 * ended when the server closes.
 */
function streamRoute(app: FastifyInstance): void {
  const open = new Set<ServerResponse>();
  app.addHook("preClose", async () => open.forEach((raw) => raw.destroy()));
  app.get("/stream", async (request, reply) => {
    const { kind, user, credential } = request.query as { kind?: StreamKind; user: string; credential: string };
    const lease = await app.tetherStreams.admit(reply, { kind: kind ?? "mcp", userId: user, credential });
    reply.hijack();
    reply.raw.writeHead(200, { "content-type": "text/event-stream" });
    reply.raw.flushHeaders();
    open.add(reply.raw);
    reply.raw.on("close", () => {
      open.delete(reply.raw);
      lease.release();
    });
  });
}

async function withStreams(t: Test, options: StreamLimitsOptions, setUp?: (app: FastifyInstance) => void) {
  const bare = await alone(t, streamLimitsPlugin, options, (app) => {
    setUp?.(app);
    streamRoute(app);
  });
  await bare.listen(); // streams held open and connection counts (maxConnections, Connection: close) need real sockets
  const openStream = streamOpener(t, bare.url);
  const open = (user: string, credential: string, kind: StreamKind = "mcp") => openStream(`/stream?${new URLSearchParams({ user, credential, kind })}`);
  return { ...bare, open };
}

t.test("it declares the error handler that renders its refusals", (t) => refusesWithout(t, streamLimitsPlugin, "tether-errors"));

t.test("per credential and per user, each kind apart; a closed stream frees its slot", async (t) => {
  const { open, app } = await withStreams(t, { perUser: 3, perCredential: 2 });
  const [alice, bob] = [`alice-${randomUUID()}`, `bob-${randomUUID()}`];

  t.equal((await open(alice, "token:a1")).status, 200);
  const second = await open(alice, "token:a1");
  t.equal(second.status, 200);
  const third = await open(alice, "token:a1");
  t.equal(third.status, 429, "the credential's third stream is refused");
  t.match(third.body, { code: "TOO_MANY_STREAMS", message: /This token already has 2 MCP notification streams open/ });
  t.equal(third.headers["retry-after"], "30", "with Retry-After (the lease time)");
  t.equal(third.headers.connection, "close", "and the refused client's connection is closed");

  t.equal((await open(alice, "token:a2")).status, 200, "another credential of the same user: within the user's cap");
  const overUser = await open(alice, "token:a3");
  t.equal(overUser.status, 429, "past the user's cap, whatever the credential");
  t.match(overUser.body, { code: "TOO_MANY_STREAMS", message: /Your account already has 3 MCP notification streams open/ });

  t.equal((await open(alice, "session:s1", "live-view")).status, 200, "another kind counts apart: a full MCP quota leaves live views alone");
  t.equal((await open(bob, "token:b1")).status, 200, "another user is not affected");
  t.equal(app.tetherStreams.held, 5);

  second.close();
  await eventually(async () => (await open(alice, "token:a3")).status === 200, 10_000, "the closed stream's slot to be free again");
});

t.test("streams together leave the reserved connections to everything else: 503 beyond", async (t) => {
  const { open, url } = await withStreams(t, { perUser: 0, perCredential: 0, reservedConnections: 3 }, (app) => {
    app.server.maxConnections = 8;
    app.get("/ping", async () => ({ ok: true }));
  });
  const streams = [];
  for (let i = 0; i < 5; i++) streams.push(await open(`user-${randomUUID()}`, `token:${i}`));
  t.same(
    streams.map((s) => s.status),
    [200, 200, 200, 200, 200],
    "8 connections less 3 reserved: 5 streams",
  );
  const refused = await open(`user-${randomUUID()}`, "token:next");
  t.equal(refused.status, 503, "the sixth is refused: the server is full, not the client at fault");
  t.match(refused.body, { code: "STREAMS_AT_CAPACITY", message: String });
  t.equal(refused.headers["retry-after"], "30", "its own Retry-After, not the generic outage one");
  t.equal((await requestOnce(`${url}/ping`)).status, 200, "an ordinary request still gets a connection");
  streams[0]!.close();
  await eventually(async () => (await open(`user-${randomUUID()}`, "token:again")).status === 200, 10_000, "a slot once a stream ends");
});

const redisClient = (t: Test, url = TEST_REDIS_URL!) => {
  const client = new Redis(url, { maxRetriesPerRequest: 1, commandTimeout: 1_000 });
  client.on("error", () => {});
  t.teardown(() => client.disconnect());
  return client;
};

redisTest(t, "with Redis: two instances share the caps; a crashed holder's leases drain within the lease time", async (t) => {
  const prefix = `tether:test:streams:${randomUUID()}:`;
  const options = { perUser: 3, perCredential: 2, prefix, leaseSeconds: 3 };
  const a = await withStreams(t, { ...options, redis: redisClient(t) });
  const b = await withStreams(t, { ...options, redis: redisClient(t) });
  const user = `shared-${randomUUID()}`;

  t.equal((await a.open(user, "token:x")).status, 200);
  t.equal((await b.open(user, "token:x")).status, 200, "the credential's second stream, on the other instance");
  const credential = await b.open(user, "token:x");
  t.equal(credential.status, 429, "its third is refused there: the other instance's stream counts");
  t.match(credential.body, { code: "TOO_MANY_STREAMS", message: /This token already has 2/ });
  const third = await a.open(user, "token:y");
  t.equal(third.status, 200);
  const account = await b.open(user, "token:z");
  t.match(account, { status: 429, body: { message: /Your account already has 3/ } }, "and the user's cap spans both");
  third.close();
  await eventually(async () => (await b.open(user, "token:z")).status === 200, 10_000, "a stream closed on one instance to free a slot on the other");

  const crashed = `crashed-${randomUUID()}`;
  const holder = holdStreams(t, { redisUrl: TEST_REDIS_URL!, prefix, userId: crashed, count: 3, leaseMs: 3_000 });
  await holder.held;
  t.equal((await a.open(crashed, "token:c")).status, 429, "another replica's streams count while it lives");
  holder.child.kill("SIGKILL");
  const killedAt = Date.now();
  await eventually(async () => (await a.open(crashed, "token:c")).status === 200, 30_000, "the crashed replica's leases to expire", 250);
  t.ok(Date.now() - killedAt <= 3_000 + 2_000, `they stopped counting within the lease time (${Date.now() - killedAt} ms)`);
});

redisTest(t, "Redis away: each instance caps its own streams (never a 5xx); once back, the shared counts are true again", async (t) => {
  const own = await startOwnRedis(t);
  const prefix = `tether:test:streams:${randomUUID()}:`;
  const options = { perUser: 2, perCredential: 2, prefix, leaseSeconds: 3 };
  const a = await withStreams(t, { ...options, redis: redisClient(t, own.url) });
  const b = await withStreams(t, { ...options, redis: redisClient(t, own.url) });
  const user = `outage-${randomUUID()}`;

  await own.stop();
  t.equal((await a.open(user, "token:1")).status, 200, "admitted on this instance's own counts");
  t.equal((await a.open(user, "token:2")).status, 200);
  t.match(await a.open(user, "token:3"), { status: 429, body: { code: "TOO_MANY_STREAMS" } }, "which still cap it");

  await own.start(); // empty: the leases taken during the outage are nowhere in Redis yet
  // Each probe that gets in leaves again before the next, so only Redis's count can refuse one.
  const probe = async () => {
    const attempt = await b.open(user, "token:4");
    if (attempt.status === 200) {
      attempt.close();
      await eventually(() => b.app.tetherStreams.held === 0, 10_000, "the probe's stream to end");
    }
    return attempt;
  };
  await eventually(async () => (await probe()).status === 429, 30_000, "the renewal to put the open streams back in Redis", 250);
  t.match(await probe(), { status: 429, body: { message: /Your account already has 2/ } }, "the other instance counts them again");
});
