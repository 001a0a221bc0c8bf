import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import t, { type Test } from "tap";
import { readJson, TestClient, uniqueEmail } from "../../helpers/client.js";
import { startOwnRedis } from "../../helpers/redis-server.js";
import { credentialPath } from "../../../src/device/credentials.js";
import { builtExecutable, startHost } from "../../host/executable.js";
import { protocolHeaders } from "../../host/helpers.js";
import { eventually } from "../../helpers/eventually.js";
import { freePort, ownPostgres, startNginx, startReplica, type Replica } from "./cluster.js";

/**
 * Two real replicas (`src/server.ts` processes) on one PostgreSQL and a Redis of the test's own, behind
 * nginx with the repo's configuration, and the real device executable connected through nginx. In
 * order: a call through each replica, concurrent approves, Redis stopped and started again, SIGKILL of
 * the stream's replica and its restart on the same port, and last (the device is gone after it) a
 * revoke made on the replica that does not hold the stream.
 */
const executable = await builtExecutable(t);

t.test("two replicas behind nginx, on PostgreSQL and Redis", async (t) => {
  const cluster = t;
  const work = await mkdtemp(path.join(os.tmpdir(), "tether-cluster-"));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const root = path.join(work, "project");
  await mkdir(root, { recursive: true });
  await writeFile(path.join(root, "notes.txt"), "old\n");

  const databaseUrl = await ownPostgres(t);
  const redis = await startOwnRedis(t);
  const [portA, portB, lbPort] = [await freePort(), await freePort(), await freePort()];
  const publicUrl = `http://127.0.0.1:${lbPort}`;
  const env = { databaseUrl, redisUrl: redis.url, publicUrl };
  // One at a time: the first one migrates the database.
  const replicas: Replica[] = [await startReplica(t, env, portA)];
  replicas.push(await startReplica(t, env, portB));
  await startNginx(t, work, lbPort, [portA, portB]);

  const owner = new TestClient(publicUrl);
  await owner.signUp(uniqueEmail("cluster"));
  const { token } = await readJson(await owner.post("/api/tokens", { name: "agent", scopes: ["host:call"] }));
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
  const configDir = path.join(work, "config");
  const host = startHost(
    executable,
    { TETHER_SERVER_URL: publicUrl, TETHER_PAIRING_CODE: code, TETHER_ROOTS: "project", TETHER_CONFIG_DIR: configDir, TETHER_DEVICE_NAME: "node-1" },
    work,
  );
  t.teardown(() => {
    if (host.child.exitCode === null) host.child.kill("SIGKILL");
  });
  await host.waitFor(/connected to .* as "node-1"/, 60_000);
  const deviceId = (await readJson(await owner.get("/api/host/devices"))).devices[0].id as string;

  /** `POST /api/host/calls` on one replica (or through nginx), with the agent's token. */
  const call = async (replica: { url: string }, tool: string, input: Record<string, unknown>): Promise<{ status: number; body: any }> => {
    const response = await fetch(`${replica.url}/api/host/calls`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ deviceId, tool, input }),
    });
    return { status: response.status, body: await readJson(response) };
  };
  /** The owner's browser session, talking to one replica directly. */
  const ownerOn = (replica: Replica) => {
    const client = new TestClient(replica.url, { origin: publicUrl });
    for (const [name, value] of owner.cookies) client.cookies.set(name, value);
    return client;
  };
  const redisClient = new Redis(redis.url, { maxRetriesPerRequest: 1, lazyConnect: true });
  redisClient.on("error", () => {});
  t.teardown(() => redisClient.disconnect());
  const holderOfStream = async (): Promise<{ holder: Replica; other: Replica }> => {
    await redisClient.connect().catch(() => {});
    let holderId = "";
    await eventually(
      async () => {
        const claim = await redisClient.get(`tether:host:device:${deviceId}`).catch(() => null);
        holderId = claim ? (JSON.parse(claim) as { r: string }).r : "";
        return replicas.some((replica) => replica.replicaId === holderId && replica.child.exitCode === null && replica.child.signalCode === null);
      },
      60_000,
      "a live replica holding the stream",
    );
    const holder = replicas.find((replica) => replica.replicaId === holderId)!;
    return { holder, other: replicas.find((replica) => replica !== holder)! };
  };

  await t.test("a call through each replica reaches the device; presence is the same on both", async (t) => {
    for (const replica of replicas) {
      const stat = await call(replica, "stat", { path: "notes.txt" });
      t.equal(stat.status, 200, `a call through the replica on ${replica.port}`);
      t.match(stat.body, { tool: "stat", result: { type: "file" } });
      const listed = await readJson(await ownerOn(replica).get("/api/host/devices"));
      t.match(listed.devices, [{ id: deviceId, online: true }], `online on the replica on ${replica.port}`);
    }
  });

  await t.test("concurrent approves on the two replicas apply the proposal once", async (t) => {
    const proposed = await call(replicas[0]!, "write_file", { path: "notes.txt", content: "new\n" });
    t.equal(proposed.status, 202);
    const approvals = await Promise.all(replicas.map((replica) => ownerOn(replica).post("/api/host/approve", { proposalId: proposed.body.proposalId })));
    const statuses = approvals.map((response) => response.status).sort();
    t.same(statuses, [200, 409], "one applies, the other is told it was already decided");
    t.equal(await readFile(path.join(root, "notes.txt"), "utf8"), "new\n");
    t.equal((await readJson(await owner.get(`/api/host/proposals/${proposed.body.proposalId}`))).status, "applied");
  });

  await t.test("Redis stops: calls answer 503 DISPATCH_UNAVAILABLE at once and /healthz says so; Redis back, the cluster recovers", async (t) => {
    await holderOfStream();
    await redis.stop();
    for (const replica of replicas) {
      await eventually(async () => (await fetch(`${replica.url}/healthz`)).status === 503, 10_000, `/healthz on ${replica.port} to notice`);
      t.match(await readJson(await fetch(`${replica.url}/healthz`)), { code: "DISPATCH_UNAVAILABLE" }, `/healthz on ${replica.port} says why`);
      const started = Date.now();
      const refused = await call(replica, "stat", { path: "notes.txt" });
      t.equal(refused.status, 503, `a call through ${replica.port} is refused`);
      t.equal(refused.body.code, "DISPATCH_UNAVAILABLE");
      t.ok(Date.now() - started < 5_000, `answered in ${Date.now() - started} ms, not after the 30 s call timeout`);
    }
    await redis.start();
    // Nothing restarted: each replica reconnects to Redis by itself, and the device reconnects to one of them.
    for (const replica of replicas) {
      await eventually(async () => (await fetch(`${replica.url}/healthz`)).status === 200, 30_000, `/healthz on ${replica.port} to recover`);
    }
    for (const replica of replicas) {
      await eventually(
        async () => (await call(replica, "stat", { path: "notes.txt" })).status === 200,
        60_000,
        `a call through ${replica.port} once the device is back`,
      );
      t.match(
        await call(replica, "stat", { path: "notes.txt" }),
        { status: 200, body: { tool: "stat", result: { type: "file" } } },
        `a call through the replica on ${replica.port} succeeds again`,
      );
    }
  });

  /** Starts a SIGKILLed replica again on its port, as a process manager would, and calls through it and through nginx. */
  const restartOnItsPort = async (t: Test, killed: Replica): Promise<Replica> => {
    // Owned by the cluster's test, not the subtest: a subtest's teardown would kill it as the subtest ends.
    const restarted = await startReplica(cluster, env, killed.port);
    replicas[replicas.indexOf(killed)] = restarted;
    t.not(restarted.replicaId, killed.replicaId, `a new replica id on ${killed.port}`);
    t.equal((await call(restarted, "stat", { path: "notes.txt" })).status, 200, `a call through the replica restarted on ${killed.port} reaches the device`);
    for (let i = 1; i <= 4; i++)
      t.equal((await call({ url: publicUrl }, "stat", { path: "notes.txt" })).status, 200, `call ${i} through nginx (both upstreams in turn)`);
    return restarted;
  };

  await t.test(
    "SIGKILL of the replica holding the stream: the waiting call fails fast, the device comes back; restarted on its port, the replica serves calls and takes the stream",
    async (t) => {
      const { holder, other } = await holderOfStream();
      host.child.kill("SIGSTOP"); // the device will not answer this call
      const inFlight = call(other, "stat", { path: "notes.txt" });
      await new Promise((resolve) => setTimeout(resolve, 500));
      const started = Date.now();
      holder.child.kill("SIGKILL");
      const failed = await inFlight;
      host.child.kill("SIGCONT");
      t.equal(failed.status, 502);
      t.equal(failed.body.code, "DEVICE_DISCONNECTED");
      t.ok(Date.now() - started < 20_000, `failed in ${Date.now() - started} ms, long before the 30 s call timeout`);
      await eventually(async () => (await call(other, "stat", { path: "notes.txt" })).status === 200, 60_000, "the device back, through the surviving replica");

      const restarted = await restartOnItsPort(t, holder);

      // The restarted replica takes streams too: with the other one SIGKILLed, the device reconnects to it
      // through nginx, and calls through the other one, restarted in turn, reach it.
      other.child.kill("SIGKILL");
      await eventually(async () => (await call(restarted, "stat", { path: "notes.txt" })).status === 200, 60_000, "the device back, on the restarted replica");
      t.equal((await holderOfStream()).holder, restarted, "the restarted replica holds the stream");
      await restartOnItsPort(t, other);
    },
  );

  await t.test("a revoke made on the replica without the stream closes the stream; the revoked token fails everywhere", async (t) => {
    const { other } = await holderOfStream();
    const { token: deviceToken } = JSON.parse(await readFile(credentialPath(configDir), "utf8")).servers[publicUrl] as { token: string };
    const exitedAt = host.exited.then((code) => ({ code, at: Date.now() }));
    const started = Date.now();
    const revoked = await ownerOn(other).request("DELETE", `/api/host/devices/${deviceId}`);
    t.equal(revoked.status, 204, `revoked on the replica on ${other.port}`);
    const exit = await exitedAt;
    t.equal(exit.code, 3, "the device was told it is revoked and exits (pair again), without reconnecting");
    t.ok(exit.at - started < 1_000, `the stream closed ${exit.at - started} ms after the revoke (bound 1 s)`);
    t.ok(
      host.stderr.some((line) => /revoked/.test(line)),
      "the device says why",
    );
    await t.rejects(stat(credentialPath(configDir)), "the device forgot the revoked credential");
    for (const replica of replicas) {
      const next = await call(replica, "stat", { path: "notes.txt" });
      t.equal(next.status, 404, `the next call through ${replica.port}`);
      t.equal(next.body.code, "DEVICE_NOT_FOUND");
      const hello = await fetch(`${replica.url}/api/host/hello`, {
        method: "POST",
        headers: { authorization: `Bearer ${deviceToken}`, "content-type": "application/json", ...protocolHeaders },
        body: JSON.stringify({ tools: [], roots: [] }),
      });
      t.equal(hello.status, 401, `the revoked token on ${replica.port}`);
      t.equal((await readJson(hello)).code, "DEVICE_REVOKED");
    }
  });
});
