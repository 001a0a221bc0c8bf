import http from "node:http";
import net from "node:net";
import t from "tap";
import { connectedDevice, pair, ScriptedDevice, signedIn, startHostServer } from "./helpers.js";
import { eventually } from "../helpers/eventually.js";
import { readJson } from "../helpers/client.js";

/** One server for the file; every test has its own owner and devices, so they stay apart. */
t.test("calls through POST /api/host/calls", async (t) => {
  const server = await startHostServer(t);

  const connected = (name = "dev") => connectedDevice(t, server.url, name);

  t.test("a read tool returns its result; the device sees the call, input and mode", async (t) => {
    const { owner, device, deviceId } = await connected();
    device.serve((call) => ({ echo: call.input, tool: call.tool, mode: call.mode }));
    const response = await owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "a.txt" } });
    t.equal(response.status, 200);
    t.same(await readJson(response), { tool: "stat", class: "read", result: { echo: { path: "a.txt" }, tool: "stat", mode: "run" } });
    const actionCall = await owner.post("/api/host/calls", { deviceId, tool: "open_path", input: { path: "a.txt" } });
    t.match(await readJson(actionCall), { class: "action", result: { mode: "run" } });

    const listed = await readJson(await owner.get("/api/host/devices"));
    t.match(listed.devices[0], { id: deviceId, online: true, roots: ["/tmp/root"] });
    t.same(
      listed.devices[0].tools.map((tool: { name: string; class: string }) => [tool.name, tool.class]),
      [
        ["stat", "read"],
        ["write_file", "mutate"],
        ["open_path", "action"],
      ],
    );
    await server.app.tetherAudit.flush();
    const audit = await server.database.db
      .selectFrom("activity_event")
      .selectAll()
      .where("device_id", "=", deviceId)
      .where("event", "=", "call")
      .orderBy("id")
      .execute();
    t.equal(audit.length, 2, "each call is in the audit log");
    t.match(audit[0], { actor: "session", tool: "stat", mode: "run", outcome: "ok" });
  });

  t.test("an API token needs the host:call scope", async (t) => {
    const { owner, device, deviceId } = await connected();
    device.serve(() => ({ ok: 1 }));
    const scoped = await readJson(await owner.post("/api/tokens", { name: "agent", scopes: ["host:call"] }));
    const other = await readJson(await owner.post("/api/tokens", { name: "other", scopes: ["something:else"] }));
    const call = (token: string) =>
      fetch(`${server.url}/api/host/calls`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ deviceId, tool: "stat", input: { path: "." } }),
      });
    t.equal((await call(scoped.token)).status, 200);
    const refused = await call(other.token);
    t.equal(refused.status, 401);
    t.equal((await readJson(refused)).code, "UNAUTHENTICATED");
    await server.app.tetherAudit.flush();
    const audit = await server.database.db.selectFrom("activity_event").select("actor").where("device_id", "=", deviceId).where("event", "=", "call").execute();
    t.same(audit, [{ actor: "token" }]);
  });

  t.test("unknown tool 400, a tool's own error 422 with its code", async (t) => {
    const { owner, device, deviceId } = await connected();
    device.serve(() => ({ error: { code: "OUTSIDE_ROOTS", message: "/etc/passwd is outside the allowed roots" } }));
    const unknown = await owner.post("/api/host/calls", { deviceId, tool: "rm_rf", input: {} });
    t.equal(unknown.status, 400);
    t.same(await readJson(unknown), { code: "UNKNOWN_TOOL", message: 'The device has no tool named "rm_rf"' });
    const outside = await owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "/etc/passwd" } });
    t.equal(outside.status, 422);
    t.same(await readJson(outside), { code: "OUTSIDE_ROOTS", message: "/etc/passwd is outside the allowed roots" });
  });

  t.test("an offline device is 409, someone else's device 404", async (t) => {
    const owner = await signedIn(server.url);
    const { deviceId } = await pair(owner);
    const offline = await owner.post("/api/host/calls", { deviceId, tool: "stat", input: {} });
    t.equal(offline.status, 409);
    t.same(await readJson(offline), { code: "DEVICE_OFFLINE", message: "The device is not connected" });
    const stranger = await signedIn(server.url);
    const foreign = await stranger.post("/api/host/calls", { deviceId, tool: "stat", input: {} });
    t.equal(foreign.status, 404);
    t.equal((await readJson(foreign)).code, "DEVICE_NOT_FOUND");
    const { deviceId: liveId } = await connected();
    const foreignLive = await stranger.post("/api/host/calls", { deviceId: liveId, tool: "stat", input: {} });
    t.equal(foreignLive.status, 404, "a connected device of someone else is not found either");
  });

  t.test("a device that does not answer in time: 504, and it is told to cancel", async (t) => {
    const { owner, device, deviceId } = await connected();
    const response = await owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "." }, timeoutMs: 200 });
    t.equal(response.status, 504);
    t.same(await readJson(response), { code: "DEVICE_TIMEOUT", message: "The device did not answer within 200 ms" });
    const call = await device.nextCall();
    t.same(await device.next("cancel"), { id: call.id });
    const late = await device.postResult({ id: call.id, ok: true, result: {} });
    t.equal(late.status, 409, "a late answer is refused");
    t.equal((await readJson(late)).code, "RESULT_ALREADY_RECEIVED");
  });

  t.test("a caller that hangs up: the device is told to cancel", async (t) => {
    const { owner, device, deviceId } = await connected();
    const controller = new AbortController();
    const pending = fetch(`${server.url}/api/host/calls`, {
      method: "POST",
      headers: { cookie: owner.cookieHeader, origin: server.url, "content-type": "application/json" },
      body: JSON.stringify({ deviceId, tool: "stat", input: { path: "." } }),
      signal: controller.signal,
    }).catch(() => "aborted");
    const call = await device.nextCall();
    controller.abort();
    t.equal(await pending, "aborted");
    t.same(await device.next("cancel"), { id: call.id });
    const audit = () =>
      server.database.db.selectFrom("activity_event").select(["outcome", "error_code"]).where("device_id", "=", deviceId).where("event", "=", "call").execute();
    await eventually(async () => (await audit()).length === 1, 5000, "the audit row");
    t.same(await audit(), [{ outcome: "error", error_code: "CALL_ABORTED" }]);
  });

  t.test("a caller that hangs up after earlier calls on the same keep-alive connection: only the waiting call is cancelled", async (t) => {
    const { owner, device, deviceId } = await connected();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.teardown(() => agent.destroy());
    const body = JSON.stringify({ deviceId, tool: "stat", input: { path: "." } });
    const headers = { cookie: owner.cookieHeader, origin: server.url, "content-type": "application/json" };
    const send = () => {
      const request = http.request(`${server.url}/api/host/calls`, { method: "POST", agent, headers });
      const answered = new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        request.on("response", (response) => response.resume().on("end", () => resolve({ status: response.statusCode!, reused: request.reusedSocket })));
        request.on("error", reject);
      });
      request.end(body);
      return { request, answered };
    };
    for (const expectReused of [false, true]) {
      const { answered } = send();
      const call = await device.nextCall();
      t.equal((await device.postResult({ id: call.id, ok: true, result: { size: 1 } })).status, 204);
      t.same(await answered, { status: 200, reused: expectReused });
    }
    const third = send();
    third.answered.catch(() => {});
    const call = await device.nextCall();
    t.ok(third.request.reusedSocket, "the third call rides the same connection");
    third.request.destroy();
    t.same(await device.next("cancel"), { id: call.id }, "the device is told to cancel the call that was waiting");
    const audit = () =>
      server.database.db
        .selectFrom("activity_event")
        .select(["outcome", "error_code"])
        .where("device_id", "=", deviceId)
        .where("event", "=", "call")
        .orderBy("id")
        .execute();
    await eventually(async () => (await audit()).length === 3, 5000, "three audit rows");
    t.same(await audit(), [
      { outcome: "ok", error_code: null },
      { outcome: "ok", error_code: null },
      { outcome: "error", error_code: "CALL_ABORTED" },
    ]);
  });

  t.test("twelve calls pipelined on one connection wait at once and all come back, with no listener-leak warning", async (t) => {
    const { owner, device, deviceId } = await connected();
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on("warning", onWarning);
    t.teardown(() => process.off("warning", onWarning));
    const { hostname, port } = new URL(server.url);
    const socket = net.connect(Number(port), hostname);
    t.teardown(() => socket.destroy());
    let received = "";
    socket.setEncoding("utf8").on("data", (chunk: string) => (received += chunk));
    const requests = Array.from({ length: 12 }, (_, i) => {
      const body = JSON.stringify({ deviceId, tool: "stat", input: { path: `f${i}` } });
      return (
        `POST /api/host/calls HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncookie: ${owner.cookieHeader}\r\norigin: ${server.url}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
      );
    });
    socket.write(requests.join(""));
    // All twelve wait at once (the device holds its answers until the last call arrives).
    const calls = [];
    for (let i = 0; i < 12; i++) calls.push(await device.nextCall());
    for (const call of calls) t.equal((await device.postResult({ id: call.id, ok: true, result: { echo: call.input } })).status, 204);
    const answered = () => received.match(/HTTP\/1\.1 200 OK/g)?.length ?? 0;
    await eventually(
      () => answered() === 12,
      10_000,
      () => `twelve answers (have ${answered()})`,
    );
    t.same(
      [...received.matchAll(/"path":"(f\d+)"/g)].map((match) => match[1]),
      Array.from({ length: 12 }, (_, i) => `f${i}`),
      "each answer in its request's order",
    );
    t.same(warnings, [], "no warning");
  });

  t.test("a device that disconnects mid-call: 502", async (t) => {
    const { owner, device, deviceId } = await connected();
    const pending = owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "." } });
    await device.nextCall();
    device.disconnect();
    const response = await pending;
    t.equal(response.status, 502);
    t.same(await readJson(response), { code: "DEVICE_DISCONNECTED", message: "The device disconnected before answering" });
    await eventually(async () => (await readJson(await owner.get("/api/host/devices"))).devices[0].online === false, 5000, "offline");
  });

  t.test("results: only from the device the call went to, only once, only for real calls", async (t) => {
    const { owner, device, deviceId } = await connected("a");
    const { device: intruder } = await connected("b");
    const pending = owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "." } });
    const call = await device.nextCall();

    const wrong = await intruder.postResult({ id: call.id, ok: true, result: { forged: true } });
    t.equal(wrong.status, 403);
    t.same(await readJson(wrong), { code: "WRONG_DEVICE", message: "This call was sent to another device" });

    const right = await device.postResult({ id: call.id, ok: true, result: { size: 1 } });
    t.equal(right.status, 204);
    t.same((await readJson(await pending)).result, { size: 1 }, "the forged result was not taken");

    const replay = await device.postResult({ id: call.id, ok: true, result: { size: 2 } });
    t.equal(replay.status, 409);
    t.equal((await readJson(replay)).code, "RESULT_ALREADY_RECEIVED");
    const wrongReplay = await intruder.postResult({ id: call.id, ok: true, result: {} });
    t.equal(wrongReplay.status, 403, "and still not from another device");

    const unknown = await device.postResult({ id: "00000000-0000-0000-0000-000000000000", ok: true, result: {} });
    t.equal(unknown.status, 404);
    t.equal((await readJson(unknown)).code, "UNKNOWN_CALL");
  });

  t.test("a newer stream replaces the older, which is closed", async (t) => {
    const { owner, device, deviceId } = await connected();
    const newer = new ScriptedDevice(server.url, deviceId, device.token);
    await newer.connect();
    t.teardown(() => newer.disconnect());
    t.same(await device.next("close"), { reason: "replaced", message: "A newer connection of this device replaced this one" });
    newer.serve(() => ({ from: "newer" }));
    const response = await owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "." } });
    t.same((await readJson(response)).result, { from: "newer" });
    t.match((await readJson(await owner.get("/api/host/devices"))).devices[0], { online: true });
  });

  t.test("concurrent calls to one device all come back to their own callers", async (t) => {
    const { owner, device, deviceId } = await connected();
    device.serve(async (call) => {
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20));
      return { n: call.input.n };
    });
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, n) => owner.post("/api/host/calls", { deviceId, tool: "stat", input: { n } }).then(readJson)),
    );
    t.same(
      responses.map((r) => r.result.n),
      Array.from({ length: 20 }, (_, n) => n),
    );
  });
});
