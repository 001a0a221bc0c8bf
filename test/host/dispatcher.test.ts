import t from "tap";
import { createMemoryDispatcher, DeviceCallError, type DeviceChannel } from "../../src/plugins/host/dispatcher.js";
import type { AnnouncedTool } from "../../src/protocol/index.js";

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
}

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

t.test("a call goes down the channel and resolves with the settled result", async (t) => {
  const dispatcher = createMemoryDispatcher();
  const channel = new RecordingChannel();
  dispatcher.connect("d1", tools, channel);
  const pending = dispatcher.call("d1", "stat", { path: "." });
  const [call] = channel.calls();
  t.match(call, { tool: "stat", input: { path: "." }, mode: "run", timeoutMs: 30_000 });
  t.equal(dispatcher.settle("d1", { id: call.id, ok: true, result: { size: 3 } }), "accepted");
  t.same(await pending, { size: 3 });
  t.equal(dispatcher.settle("d1", { id: call.id, ok: true, result: {} }), "already_settled");
  t.equal(dispatcher.settle("d2", { id: call.id, ok: true, result: {} }), "wrong_device");
  t.equal(dispatcher.settle("d1", { id: "nope", ok: true, result: {} }), "unknown_call");
});

t.test("a mutate tool defaults to plan; modes must fit the class", async (t) => {
  const dispatcher = createMemoryDispatcher();
  const channel = new RecordingChannel();
  dispatcher.connect("d1", tools, channel);
  void dispatcher.call("d1", "write_file", {}).catch(() => {});
  t.equal(channel.calls()[0].mode, "plan");
  t.match(await rejection(dispatcher.call("d1", "stat", {}, { mode: "apply" })), { code: "INVALID_MODE" });
  t.match(await rejection(dispatcher.call("d1", "write_file", {}, { mode: "run" })), { code: "INVALID_MODE" });
  dispatcher.closeAll();
});

t.test("unknown tool, offline device, busy device", async (t) => {
  const dispatcher = createMemoryDispatcher({ maxPendingPerDevice: 2 });
  t.same(await rejection(dispatcher.call("ghost", "stat", {})), { code: "DEVICE_OFFLINE", message: "The device is not connected", fromTool: false });
  dispatcher.connect("d1", tools, new RecordingChannel());
  t.match(await rejection(dispatcher.call("d1", "format_disk", {})), { code: "UNKNOWN_TOOL" });
  const a = dispatcher.call("d1", "stat", {}).catch(() => {});
  const b = dispatcher.call("d1", "stat", {}).catch(() => {});
  t.match(await rejection(dispatcher.call("d1", "stat", {})), { code: "DEVICE_BUSY" });
  dispatcher.closeAll();
  await Promise.all([a, b]);
});

t.test("timeout: the call fails and the device is told to cancel", async (t) => {
  const dispatcher = createMemoryDispatcher();
  const channel = new RecordingChannel();
  dispatcher.connect("d1", tools, channel);
  t.match(await rejection(dispatcher.call("d1", "stat", {}, { timeoutMs: 20 })), { code: "DEVICE_TIMEOUT" });
  const id = channel.calls()[0].id;
  t.same(channel.sent.at(-1), { event: "cancel", data: { id } });
  t.equal(dispatcher.settle("d1", { id, ok: true, result: {} }), "already_settled");
});

t.test("an aborted caller stops waiting", async (t) => {
  const dispatcher = createMemoryDispatcher();
  dispatcher.connect("d1", tools, new RecordingChannel());
  const controller = new AbortController();
  const pending = dispatcher.call("d1", "stat", {}, { signal: controller.signal });
  controller.abort();
  t.match(await rejection(pending), { code: "CALL_ABORTED" });
});

t.test("a tool's own error keeps its code", async (t) => {
  const dispatcher = createMemoryDispatcher();
  const channel = new RecordingChannel();
  dispatcher.connect("d1", tools, channel);
  const pending = dispatcher.call("d1", "stat", {});
  dispatcher.settle("d1", { id: channel.calls()[0].id, ok: false, error: { code: "OUTSIDE_ROOTS", message: "no" } });
  t.same(await rejection(pending), { code: "OUTSIDE_ROOTS", message: "no", fromTool: true });
});

t.test("disconnect mid-call, replacement, revocation, shutdown; presence follows", async (t) => {
  const dispatcher = createMemoryDispatcher();
  const presence: Array<[string, boolean]> = [];
  dispatcher.onPresence((id, online) => presence.push([id, online]));

  const first = new RecordingChannel();
  const connection = dispatcher.connect("d1", tools, first);
  const inFlight = dispatcher.call("d1", "stat", {});
  connection.detach();
  t.match(await rejection(inFlight), { code: "DEVICE_DISCONNECTED" });
  t.equal(dispatcher.isOnline("d1"), false);

  const older = new RecordingChannel();
  const olderConnection = dispatcher.connect("d1", tools, older);
  const lost = dispatcher.call("d1", "stat", {});
  const newer = new RecordingChannel();
  dispatcher.connect("d1", tools, newer);
  t.match(older.closed, { reason: "replaced" });
  t.match(await rejection(lost), { code: "DEVICE_DISCONNECTED" });
  olderConnection.detach();
  t.equal(dispatcher.isOnline("d1"), true, "the old stream ending does not take the new one offline");

  const revokedCall = dispatcher.call("d1", "stat", {});
  dispatcher.disconnect("d1", "revoked", "gone");
  t.same(newer.closed, { reason: "revoked", message: "gone" });
  t.match(await rejection(revokedCall), { code: "DEVICE_DISCONNECTED" });

  const last = new RecordingChannel();
  dispatcher.connect("d2", tools, last);
  const shutdownCall = dispatcher.call("d2", "stat", {});
  dispatcher.closeAll();
  t.match(last.closed, { reason: "shutdown" });
  t.match(await rejection(shutdownCall), { code: "DEVICE_DISCONNECTED" });
  t.same(presence, [
    ["d1", true],
    ["d1", false],
    ["d1", true],
    ["d1", false],
    ["d2", true],
    ["d2", false],
  ]);
});
