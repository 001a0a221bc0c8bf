/**
 * No check gets weaker with several replicas. Three app instances on one PostgreSQL database and one Redis,
 * each with its own LISTEN connections and its own session, token and device caches, every cache warmed
 * first (so a replica that missed an invalidation would serve the old answer and fail the test): a revoked
 * device token, a revoked API token and a deactivated owner each fail on the next request on every replica.
 *
 * The replica that made the change drops its own entries before it answers, so there the very next request
 * is checked as is; the others hear of it from PostgreSQL a moment after the commit, so their first answer is
 * taken within a few seconds of the change (`afterSqlChange`), far below the caches' 5-minute age bound.
 * Last, on the Redis dispatcher: a device result refused at one replica's edge ends the call waiting on another.
 */
import t, { type Test } from "tap";
import { startTestApp, type TestApp } from "../../helpers/app.js";
import { afterSqlChange, bearer, mintToken, newUser } from "../../helpers/auth.js";
import { readJson, TestClient } from "../../helpers/client.js";
import { TEST_DATABASE_URL } from "../../helpers/database.js";
import { startOwnRedis } from "../../helpers/redis-server.js";
import { pair, ScriptedDevice } from "../../host/helpers.js";
import { eventually } from "../../helpers/eventually.js";

if (!TEST_DATABASE_URL) {
  t.plan(0, "replicas need a PostgreSQL server (PGlite is one process): run with TEST_DATABASE_URL=postgres://… (CI does)");
} else {
  const redis = await startOwnRedis(t);
  const env = { REDIS_URL: redis.url };
  const first = await startTestApp(t, { env });
  const replicas: TestApp[] = [first, await startTestApp(t, { env, database: first.database }), await startTestApp(t, { env, database: first.database })];

  /** The same browser session, on another replica (each replica trusts its own address as the origin). */
  const sessionOn = (client: TestClient, replica: TestApp) => {
    const other = new TestClient(replica.url);
    for (const [name, value] of client.cookies) other.cookies.set(name, value);
    return other;
  };
  /** Each replica's answer after a change made on `changedOn`: the very next one there, the first within a few seconds elsewhere. */
  const afterChange = <T>(replica: TestApp, changedOn: TestApp, probe: () => Promise<T>, settled: (value: T) => boolean) =>
    replica === changedOn ? probe() : afterSqlChange(probe, settled);
  const status = async (response: Promise<Response>) => {
    const answered = await response;
    return { status: answered.status, code: (await readJson(answered))?.code as string | undefined };
  };

  /** An owner with a paired device whose stream is on `holder`, and an agent token to call it with. */
  const pairedDevice = async (t: Test, label: string, holder: TestApp) => {
    const owner = await newUser(first.url, label);
    const { deviceId, token: deviceToken } = await pair(owner.client, `${label}-device`);
    const agentToken = await mintToken(owner.client, { scopes: ["host:call"] });
    const device = new ScriptedDevice(holder.url, deviceId, deviceToken);
    t.equal((await device.hello()).status, 200);
    await device.connect();
    t.teardown(() => device.disconnect());
    const call = (replica: TestApp, timeoutMs = 30_000) =>
      status(
        fetch(`${replica.url}/api/host/calls`, {
          method: "POST",
          headers: { ...bearer(agentToken), "content-type": "application/json" },
          body: JSON.stringify({ deviceId, tool: "stat", input: { path: "f" }, timeoutMs }),
        }),
      );
    const hello = (replica: TestApp) => status(new ScriptedDevice(replica.url, deviceId, deviceToken).hello());
    for (const replica of replicas) {
      await eventually(
        async () => (await readJson(await fetch(`${replica.url}/api/host/devices/${deviceId}`, { headers: bearer(agentToken) }))).online === true,
        10_000,
        "the device online on every replica",
      );
    }
    return { owner, deviceId, device, call, hello };
  };

  /** `pairedDevice`, answering `stat` calls, with every replica's caches warmed for it. */
  const ownerWithDevice = async (t: Test, label: string, holder: TestApp) => {
    const paired = await pairedDevice(t, label, holder);
    paired.device.serve(() => ({ type: "file", size: 1 }));
    // Twice on every replica: the first request fills its caches (token, owner, device token), the second is served from them.
    for (const replica of replicas) {
      for (let i = 0; i < 2; i++) {
        t.equal((await paired.call(replica)).status, 200, `warm: a call through ${replica.url}`);
        t.equal((await paired.hello(replica)).status, 200, `warm: the device token on ${replica.url}`);
      }
    }
    return paired;
  };

  t.test("a device revoked on one replica: its token fails on every replica, its stream on another closes", async (t) => {
    const { owner, deviceId, device, hello } = await ownerWithDevice(t, "revoke-device", replicas[2]!);
    const changedOn = replicas[0]!;
    t.equal((await sessionOn(owner.client, changedOn).request("DELETE", `/api/host/devices/${deviceId}`)).status, 204);
    for (const replica of replicas) {
      const answer = await afterChange(
        replica,
        changedOn,
        () => hello(replica),
        (a) => a.status === 401,
      );
      t.same(answer, { status: 401, code: "DEVICE_REVOKED" }, `the revoked device token on ${replica.url}`);
    }
    t.match(await device.next("close"), { reason: "revoked" }, "the stream held by another replica was closed");
  });

  t.test("an API token revoked on one replica fails on every replica", async (t) => {
    const { owner, call } = await ownerWithDevice(t, "revoke-token", replicas[1]!);
    const changedOn = replicas[1]!;
    const tokens = (await readJson(await sessionOn(owner.client, changedOn).get("/api/tokens"))).tokens as Array<{ id: string }>;
    t.equal(tokens.length, 1);
    t.equal((await sessionOn(owner.client, changedOn).request("DELETE", `/api/tokens/${tokens[0]!.id}`)).status, 204);
    for (const replica of replicas) {
      const answer = await afterChange(
        replica,
        changedOn,
        () => call(replica),
        (a) => a.status === 401,
      );
      t.equal(answer.status, 401, `the revoked API token on ${replica.url}`);
    }
  });

  t.test("an owner deactivated on one replica: token, device token and session fail on every replica; the stream closes", async (t) => {
    const { owner, device, call, hello } = await ownerWithDevice(t, "deactivated-owner", replicas[2]!);
    for (const replica of replicas) t.equal((await sessionOn(owner.client, replica).get("/api/me")).status, 200, `warm: the session on ${replica.url}`);
    const changedOn = replicas[0]!;
    const admin = await newUser(changedOn.url, "admin", { adminOf: first.app });
    t.equal((await admin.client.post(`/api/admin/users/${owner.id}/deactivate`, {})).status, 200);
    for (const replica of replicas) {
      const called = await afterChange(
        replica,
        changedOn,
        () => call(replica),
        (a) => a.status === 401,
      );
      t.equal(called.status, 401, `the owner's API token on ${replica.url}`);
      const greeted = await afterChange(
        replica,
        changedOn,
        () => hello(replica),
        (a) => a.status === 401,
      );
      t.same(greeted, { status: 401, code: "DEVICE_REVOKED" }, `the owner's device token on ${replica.url}`);
      const me = await afterChange(
        replica,
        changedOn,
        () => status(sessionOn(owner.client, replica).get("/api/me")),
        (a) => a.status === 401,
      );
      t.equal(me.status, 401, `the owner's session on ${replica.url}`);
    }
    t.match(await device.next("close"), { reason: "revoked" }, "the owner's device stream, held by another replica, was closed");
  });

  t.test("a result refused at the edge of one replica ends the call waiting on another (through Redis)", async (t) => {
    const { device, call } = await pairedDevice(t, "refused-result", replicas[2]!);
    const answer = call(replicas[0]!, 60_000);
    const called = await device.nextCall();
    const posted = await fetch(`${replicas[1]!.url}/api/host/result/${called.id}`, {
      method: "POST",
      headers: device.headers({ "content-type": "application/json" }),
      body: JSON.stringify({ ok: true, result: { name: "a\u0000b" } }),
    });
    t.same(await status(Promise.resolve(posted)), { status: 400, code: "INVALID_CHARACTERS" }, "the device is told why");
    t.same(await answer, { status: 502, code: "DEVICE_RESULT_INVALID" }, "the caller, on another replica, at once (not at its 60 s timeout)");
  });
}
