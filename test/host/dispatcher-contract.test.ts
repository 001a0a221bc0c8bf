import { randomUUID } from "node:crypto";
import t, { type Test } from "tap";
import { DeviceCallError, type DeviceChannel, type Dispatcher } from "../../src/plugins/host/dispatcher.js";
import { createMemoryDispatcher, type MemoryDispatcherOptions } from "../../src/plugins/host/memory-dispatcher.js";
import { createRedisDispatcher } from "../../src/plugins/host/redis-dispatcher.js";
import type { AnnouncedTool } from "../../src/protocol/index.js";
import { startOwnRedis } from "../helpers/redis-server.js";
import { eventually } from "../helpers/eventually.js";

/**
 * One contract, two backends. Each test gets two replicas: `holder` (where the device's stream is)
 * and `caller` (where the call is made, and where results are often posted). In memory both are the
 * one dispatcher; on Redis they are two dispatchers on one Redis, as two processes would be.
 */
interface Replicas {
  holder: Dispatcher;
  caller: Dispatcher;
}

type Backend = (t: Test, options?: MemoryDispatcherOptions) => Promise<Replicas>;

const memory: Backend = async (t, options) => {
  const dispatcher = createMemoryDispatcher(options);
  t.teardown(() => dispatcher.closeAll());
  return { holder: dispatcher, caller: dispatcher };
};

const redisBackend = async (t: Test): Promise<Backend> => {
  const redis = await startOwnRedis(t);
  return async (t, options) => {
    const prefix = `contract:${randomUUID()}:`;
    const make = () => createRedisDispatcher({ ...options, url: redis.url, prefix, heartbeatMs: 200 });
    const holder = make();
    const caller = make();
    t.teardown(async () => {
      await holder.closeAll();
      await caller.closeAll();
    });
    await eventually(() => holder.available() && caller.available(), 10_000, "both replicas on Redis");
    return { holder, caller };
  };
};

/** The dispatcher is pure: a channel is anything with send and close, so these tests need no server. */
class RecordingChannel implements DeviceChannel {
  sent: Array<{ event: string; data: any }> = [];
  closed: { reason: string; message: string } | undefined;
  send(event: string, data: unknown) {
    this.sent.push({ event, data });
  }
  close(reason: "replaced" | "revoked" | "shutdown", message: string) {
    this.closed = { reason, message };
  }
  calls() {
    return this.sent.filter((m) => m.event === "call").map((m) => m.data);
  }
  async nthCall(n: number) {
    await eventually(() => this.calls().length >= n, 10_000, `call #${n} on the stream`);
    return this.calls()[n - 1];
  }
}

const d1 = { id: "d1", userId: "u1" };
const d2 = { id: "d2", userId: "u1" };
const tools: AnnouncedTool[] = [
  { name: "stat", description: "", inputSchema: {}, class: "read" },
  { name: "write_file", description: "", inputSchema: {}, class: "mutate" },
];

const rejection = async (promise: Promise<unknown>) => {
  try {
    await promise;
  } catch (error) {
    if (error instanceof DeviceCallError) return { code: error.code, message: error.message, fromTool: error.fromTool };
    throw error;
  }
  throw new Error("expected a rejection");
};

/** Connects d1 on the holder and waits until the caller sees it online. */
async function connected(replicas: Replicas, device = d1) {
  const channel = new RecordingChannel();
  const connection = await replicas.holder.connect(device, tools, channel);
  await eventually(() => replicas.caller.isOnline(device.id), 10_000, "presence on the caller");
  return { channel, connection };
}

function contract(t: Test, backend: Backend) {
  t.test("a call reaches the stream wherever it is; its result, posted to either replica, reaches the caller once", async (t) => {
    const replicas = await backend(t);
    const { holder, caller } = replicas;
    const { channel } = await connected(replicas);
    t.same(caller.toolsOf("d1"), tools);

    const pending = caller.call("d1", "stat", { path: "." });
    const call = await channel.nthCall(1);
    t.match(call, { tool: "stat", input: { path: "." }, mode: "run", timeoutMs: 30_000 });
    t.same(await caller.expects("d1", call.id), { verdict: "accepted", toolClass: "read" });
    t.same(await holder.expects("d2", call.id), { verdict: "wrong_device" });
    t.equal(await caller.settle("d1", { id: call.id, ok: true, result: { size: 3 } }), "accepted");
    t.same(await pending, { size: 3 });
    t.equal(await holder.settle("d1", { id: call.id, ok: true, result: {} }), "already_settled");
    t.equal(await caller.settle("d2", { id: call.id, ok: true, result: {} }), "wrong_device");
    t.equal(await caller.settle("d1", { id: "nope", ok: true, result: {} }), "unknown_call");
    t.same(await caller.expects("d1", "nope"), { verdict: "unknown_call" });

    const second = caller.call("d1", "stat", {});
    t.equal(await holder.settle("d1", { id: (await channel.nthCall(2)).id, ok: true, result: 2 }), "accepted");
    t.equal(await second, 2);
  });

  t.test("modes fit the class; unknown tool, offline and busy devices are refused", async (t) => {
    const replicas = await backend(t, { maxPendingPerDevice: 2 });
    const { caller } = replicas;
    t.same(await rejection(caller.call("ghost", "stat", {})), { code: "DEVICE_OFFLINE", message: "The device is not connected", fromTool: false });
    const { channel } = await connected(replicas);
    const plan = caller.call("d1", "write_file", {}).catch(() => {});
    t.equal((await channel.nthCall(1)).mode, "plan");
    t.match(await rejection(caller.call("d1", "stat", {}, { mode: "apply" })), { code: "INVALID_MODE" });
    t.match(await rejection(caller.call("d1", "write_file", {}, { mode: "run" })), { code: "INVALID_MODE" });
    t.match(await rejection(caller.call("d1", "format_disk", {})), { code: "UNKNOWN_TOOL" });
    const other = caller.call("d1", "stat", {}).catch(() => {});
    await channel.nthCall(2);
    t.match(await rejection(caller.call("d1", "stat", {})), { code: "DEVICE_BUSY" });
    await replicas.holder.closeAll();
    await Promise.all([plan, other]);
  });

  t.test("a timeout, and a caller that stops waiting: the device is told to cancel", async (t) => {
    const replicas = await backend(t);
    const { holder, caller } = replicas;
    const { channel } = await connected(replicas);
    t.match(await rejection(caller.call("d1", "stat", {}, { timeoutMs: 50 })), { code: "DEVICE_TIMEOUT" });
    const timedOut = (await channel.nthCall(1)).id;
    await eventually(() => channel.sent.some((m) => m.event === "cancel" && m.data.id === timedOut), 10_000, "the cancel");
    t.equal(await holder.settle("d1", { id: timedOut, ok: true, result: {} }), "already_settled");

    const controller = new AbortController();
    const abandoned = caller.call("d1", "stat", {}, { signal: controller.signal });
    const id = (await channel.nthCall(2)).id;
    controller.abort();
    t.match(await rejection(abandoned), { code: "CALL_ABORTED" });
    await eventually(() => channel.sent.some((m) => m.event === "cancel" && m.data.id === id), 10_000, "the cancel");
  });

  t.test("a tool's own error keeps its code", async (t) => {
    const replicas = await backend(t);
    const { channel } = await connected(replicas);
    // Observed from the start: on Redis the call's outcome can arrive before settle's own answer.
    const pending = rejection(replicas.caller.call("d1", "stat", {}));
    await replicas.caller.settle("d1", { id: (await channel.nthCall(1)).id, ok: false, error: { code: "OUTSIDE_ROOTS", message: "no" } });
    t.same(await pending, { code: "OUTSIDE_ROOTS", message: "no", fromTool: true });
  });

  t.test("disconnect mid-call, replacement from the other replica, revocation, shutdown; presence follows everywhere", async (t) => {
    const replicas = await backend(t);
    const { holder, caller } = replicas;
    const seen: Array<[string, boolean]> = [];
    caller.onPresence(({ deviceId, userId, online }) => {
      t.equal(userId, "u1", "a presence change names the owner");
      seen.push([deviceId, online]);
    });

    const first = await connected(replicas);
    const inFlight = rejection(caller.call("d1", "stat", {}));
    await first.channel.nthCall(1);
    first.connection.detach();
    t.match(await inFlight, { code: "DEVICE_DISCONNECTED" });
    await eventually(() => !caller.isOnline("d1") && !holder.isOnline("d1"), 10_000, "offline everywhere");

    const older = await connected(replicas);
    const lost = rejection(caller.call("d1", "stat", {}));
    await older.channel.nthCall(1);
    const newer = new RecordingChannel();
    await caller.connect(d1, tools, newer); // the device reconnected, through the other replica
    await eventually(() => older.channel.closed !== undefined, 10_000, "the older stream closed");
    t.match(older.channel.closed, { reason: "replaced" });
    t.match(await lost, { code: "DEVICE_DISCONNECTED" });
    older.connection.detach();
    // Were the old stream's end to take the device offline later, the presence sequence checked at the end would
    // hold an extra offline and online between the reconnection and the revocation.
    t.ok(holder.isOnline("d1") && caller.isOnline("d1"), "the old stream ending does not take the new one offline");

    const revokedCall = rejection(holder.call("d1", "stat", {}));
    await newer.nthCall(1);
    await holder.disconnect("d1", "revoked", "gone"); // revoked on the replica without the stream
    await eventually(() => newer.closed !== undefined, 10_000, "the revoked stream closed");
    t.same(newer.closed, { reason: "revoked", message: "gone" });
    t.match(await revokedCall, { code: "DEVICE_DISCONNECTED" });
    await eventually(() => !holder.isOnline("d1"), 10_000, "offline on the other replica");

    const last = new RecordingChannel();
    await holder.connect(d2, tools, last);
    await eventually(() => caller.isOnline("d2"), 10_000, "d2 online on the caller");
    const shutdownCall = rejection(caller.call("d2", "stat", {}));
    await last.nthCall(1);
    await holder.closeAll();
    t.match(last.closed, { reason: "shutdown" });
    t.match(await shutdownCall, { code: "DEVICE_DISCONNECTED" });
    await eventually(() => !caller.isOnline("d2"), 10_000, "d2 offline on the caller");
    t.same(
      seen.filter(([, online], i) => i === 0 || seen[i - 1]![1] !== online || seen[i - 1]![0] !== seen[i]![0]),
      [
        ["d1", true],
        ["d1", false],
        ["d1", true],
        ["d1", false],
        ["d2", true],
        ["d2", false],
      ],
      "online and offline, in order, on the replica without the stream",
    );
  });
}

t.test("in memory", async (t) => contract(t, memory));

t.test("in memory: the last `settledMemory` settled calls are told apart from unknown ones, older ones are forgotten", async (t) => {
  const replicas = await memory(t, { settledMemory: 3 });
  const { holder, caller } = replicas;
  const { channel } = await connected(replicas);
  const ids: string[] = [];
  for (let n = 1; n <= 7; n++) {
    const pending = caller.call("d1", "stat", {});
    const { id } = await channel.nthCall(n);
    ids.push(id);
    t.equal(await holder.settle("d1", { id, ok: true, result: n }), "accepted");
    t.equal(await pending, n);
  }
  t.same(
    await Promise.all(ids.map((id) => holder.settle("d1", { id, ok: true, result: 0 }))),
    ["unknown_call", "unknown_call", "unknown_call", "unknown_call", "already_settled", "already_settled", "already_settled"],
    "a replay of the last three is a replay; the four before are unknown",
  );
  t.equal(await holder.settle("d2", { id: ids[6]!, ok: true, result: 0 }), "wrong_device");
});
t.test("on Redis, two replicas", async (t) => contract(t, await redisBackend(t)));

t.test("on Redis: Redis goes away, calls fail at once with DISPATCH_UNAVAILABLE and streams close; it comes back and so do they", async (t) => {
  const redis = await startOwnRedis(t);
  const prefix = `outage:${randomUUID()}:`;
  const holder = createRedisDispatcher({ url: redis.url, prefix, heartbeatMs: 200 });
  const caller = createRedisDispatcher({ url: redis.url, prefix, heartbeatMs: 200 });
  t.teardown(async () => {
    await holder.closeAll();
    await caller.closeAll();
  });
  await eventually(() => holder.available() && caller.available(), 10_000, "both replicas on Redis");
  const { channel } = await connected({ holder, caller });

  await redis.stop();
  await eventually(() => !holder.available() && !caller.available(), 10_000, "both replicas to notice");
  t.match(await rejection(caller.call("d1", "stat", {})), { code: "DISPATCH_UNAVAILABLE" }, "a call fails at once");
  t.match(channel.closed, { reason: "shutdown" }, "the stream is closed, so the device reconnects later");
  t.notOk(caller.isOnline("d1"));

  await redis.start();
  await eventually(() => holder.available() && caller.available(), 20_000, "both replicas to recover by themselves");
  const again = await connected({ holder, caller }); // the device reconnects
  const pending = caller.call("d1", "stat", {});
  t.equal(await holder.settle("d1", { id: (await again.channel.nthCall(1)).id, ok: true, result: "back" }), "accepted");
  t.equal(await pending, "back");
});
