import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import t from "tap";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { startOwnRedis } from "../helpers/redis-server.js";
import { builtExecutable, startHost } from "../host/executable.js";
import { eventually, json } from "../host/helpers.js";
import { freePort, ownPostgres, startNginx, startReplica, type Replica } from "./cluster.js";

/**
 * Two real replicas (`src/server.ts` processes) on one PostgreSQL and one Redis, behind nginx with the
 * repo's configuration, and the real device executable connected through nginx. (Redis stopping and
 * coming back is tested on the dispatchers themselves, in test/host/dispatcher-contract.test.ts.)
 */
const SLOW = process.env.TETHER_SLOW_TESTS === "1";
if (!SLOW) t.plan(0, "slow (two replicas, nginx, a Redis, the device executable: minutes): run it with TETHER_SLOW_TESTS=1 npx tap test/cluster/cluster.test.ts (CI does)");
const executable = SLOW ? await builtExecutable(t) : "";

if (SLOW) t.test("two replicas behind nginx, on PostgreSQL and Redis", async (t) => {
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
  const { token } = await json(await owner.post("/api/tokens", { name: "agent", scopes: ["host:call"] }));
  const { code } = await json(await owner.post("/api/host/pairing-codes"));
  const host = startHost(executable, { TETHER_SERVER_URL: publicUrl, TETHER_PAIRING_CODE: code, TETHER_ROOTS: "project", TETHER_CONFIG_DIR: path.join(work, "config"), TETHER_DEVICE_NAME: "node-1" }, work);
  t.teardown(() => {
    if (host.child.exitCode === null) host.child.kill("SIGKILL");
  });
  await host.waitFor(/connected to .* as "node-1"/, 60_000);
  const deviceId = (await json(await owner.get("/api/host/devices"))).devices[0].id as string;

  /** `POST /api/host/calls` on one replica, with the agent's token. */
  const call = async (replica: Replica, tool: string, input: Record<string, unknown>): Promise<{ status: number; body: any }> => {
    const response = await fetch(`${replica.url}/api/host/calls`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ deviceId, tool, input }),
    });
    return { status: response.status, body: await json(response) };
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
    await eventually(async () => {
      const claim = await redisClient.get(`tether:host:device:${deviceId}`).catch(() => null);
      holderId = claim ? (JSON.parse(claim) as { r: string }).r : "";
      return replicas.some((replica) => replica.replicaId === holderId && replica.child.exitCode === null && replica.child.signalCode === null);
    }, 60_000, "a live replica holding the stream");
    const holder = replicas.find((replica) => replica.replicaId === holderId)!;
    return { holder, other: replicas.find((replica) => replica !== holder)! };
  };

  await t.test("a call through each replica reaches the device; presence is the same on both", async (t) => {
    for (const replica of replicas) {
      const stat = await call(replica, "stat", { path: "notes.txt" });
      t.equal(stat.status, 200, `a call through the replica on ${replica.port}`);
      t.match(stat.body, { tool: "stat", result: { type: "file" } });
      const listed = await json(await ownerOn(replica).get("/api/host/devices"));
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
    t.equal((await json(await owner.get(`/api/host/proposals/${proposed.body.proposalId}`))).status, "applied");
  });

  await t.test("SIGKILL of the replica holding the stream: the waiting call fails fast, the device comes back through nginx", async (t) => {
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
  });
});
