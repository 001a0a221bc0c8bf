/**
 * `POST /api/host/results`: several results in one request. The scripted device posts batches by
 * hand (what the server takes and refuses); the real device runtime, under many calls at once,
 * batches by itself (its requests are counted on the server).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import os from "node:os";
import path from "node:path";
import { Type } from "@sinclair/typebox";
import t, { type Test } from "tap";
import { runHost } from "../../src/device/host.js";
import { MAX_RESULT_BATCH_BYTES, MAX_RESULT_BATCH_ITEMS, type ResultBody } from "../../src/protocol/index.js";
import { builtinTools, defineLocalTool, type LocalTool } from "../../src/tools/index.js";
import { readJson } from "../helpers/client.js";
import { connectedDevice, signedIn, startHostServer, type ScriptedDevice } from "./helpers.js";
import { eventually } from "../helpers/eventually.js";

const postBatch = (device: ScriptedDevice, body: unknown) =>
  fetch(`${device.url}/api/host/results`, {
    method: "POST",
    headers: device.headers({ "content-type": "application/json" }),
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

t.test("a batch settles each waiting call with its own result, and lists what it did not take", async (t) => {
  const server = await startHostServer(t);
  const { owner, deviceId, device } = await connectedDevice(t, server.url);
  const other = await connectedDevice(t, server.url);

  const waiting = [0, 1, 2].map((n) => owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: String(n) } }).then(readJson));
  const calls = [await device.nextCall(), await device.nextCall(), await device.nextCall()];
  const foreign = other.owner.post("/api/host/calls", { deviceId: other.deviceId, tool: "stat", input: { path: "x" } });
  const foreignCall = await other.device.nextCall();

  const results: ResultBody[] = calls.map((call) => ({ id: call.id, ok: true, result: { path: call.input.path } }));
  results.push({ id: "no-such-call", ok: true, result: null });
  results.push({ id: foreignCall.id, ok: true, result: "not yours" });
  const response = await postBatch(device, { results });
  t.equal(response.status, 200);
  t.same((await readJson(response)).refused, [
    { id: "no-such-call", code: "UNKNOWN_CALL" },
    { id: foreignCall.id, code: "WRONG_DEVICE" },
  ]);
  t.same(
    (await Promise.all(waiting)).map((reply) => reply.result.path),
    ["0", "1", "2"],
    "each caller got its own result",
  );

  const again = await postBatch(device, { results: [results[0]] });
  t.same((await readJson(again)).refused, [{ id: calls[0]!.id, code: "RESULT_ALREADY_RECEIVED" }], "a result is taken once");

  t.equal((await other.device.postResult({ id: foreignCall.id, ok: false, error: { code: "E", message: "failed" } })).status, 204);
  t.match(await readJson(await foreign), { code: "E" }, "the other device's call was untouched by the refused result");
});

t.test("a bad batch is a clear 4xx, never a 500", async (t) => {
  const server = await startHostServer(t);
  const { device } = await connectedDevice(t, server.url);
  const item = { id: "a", ok: true, result: 1 };
  const cases: Array<[string, unknown, number, string]> = [
    ["empty", { results: [] }, 400, "INVALID_INPUT"],
    ["too many", { results: Array.from({ length: MAX_RESULT_BATCH_ITEMS + 1 }, (_, n) => ({ ...item, id: `c${n}` })) }, 400, "INVALID_INPUT"],
    ["an unknown field", { results: [item], extra: true }, 400, "INVALID_INPUT"],
    ["an item without an outcome", { results: [{ id: "a" }] }, 400, "INVALID_INPUT"],
    ["too large in all", { results: [{ ...item, result: "x".repeat(MAX_RESULT_BATCH_BYTES) }] }, 413, ""],
    ["not JSON", "{results:", 400, ""],
    ["nested too deeply", `{"results":[{"id":"a","ok":true,"result":${"[".repeat(200)}${"]".repeat(200)}}]}`, 400, "RESULT_TOO_DEEP"],
  ];
  for (const [what, body, status, code] of cases) {
    const response = await postBatch(device, body);
    t.equal(response.status, status, what);
    const reply = await readJson(response);
    t.type(reply.message, "string", `${what}: a message`);
    if (code) t.equal(reply.code, code, what);
  }
  const anonymous = await fetch(`${server.url}/api/host/results`, {
    method: "POST",
    headers: { "content-type": "application/json", ...device.headers(), authorization: "Bearer dt_nope" },
    body: JSON.stringify({ results: [item] }),
  });
  t.equal(anonymous.status, 401, "a device token is required");
});

/** The device runtime in this process, paired with a new owner on a new server; requests counted by path. */
async function runtimeDevice(t: Test, tools: readonly LocalTool[], dir: string, concurrency = 16) {
  const server = await startHostServer(t);
  const requests: string[] = [];
  server.app.server.on("request", (request: IncomingMessage) => requests.push(request.url ?? ""));
  const owner = await signedIn(server.url);
  const minted = await readJson(await owner.post("/api/host/pairing-codes"));
  const stop = new AbortController();
  const lines: string[] = [];
  const running = runHost({
    server: server.url,
    tools,
    concurrency,
    roots: [dir],
    configDir: path.join(dir, ".cfg"),
    pairingCode: minted.code,
    handleSignals: false,
    signal: stop.signal,
    log: (line) => lines.push(line),
  });
  t.teardown(async () => {
    stop.abort();
    await running;
  });
  await eventually(() => lines.some((line) => line.includes("connected to")), 15_000, "the device to connect");
  const deviceId = (await readJson(await owner.get("/api/host/devices"))).devices[0].id as string;
  const call = (tool: string, input: unknown) =>
    owner.post("/api/host/calls", { deviceId, tool, input }).then(async (response) => ({ status: response.status, body: await readJson(response) }));
  return { requests, call };
}

const tempDir = async (t: Test) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-batch-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
};

t.test("the device runtime posts the results of calls in flight together", async (t) => {
  const dir = await tempDir(t);
  for (let n = 0; n < 32; n++) await writeFile(path.join(dir, `file-${n}.txt`), `file ${n}\n`);
  const { requests, call } = await runtimeDevice(t, builtinTools, dir);
  requests.length = 0;
  for (let round = 0; round < 3; round++) {
    const replies = await Promise.all(Array.from({ length: 32 }, (_, n) => call("stat", { path: `file-${n}.txt` })));
    t.same(
      replies.map((reply) => reply.body.result.size),
      Array.from({ length: 32 }, (_, n) => `file ${n}\n`.length),
      `round ${round}: every caller got its own file's size`,
    );
  }
  const batches = requests.filter((url) => url === "/api/host/results").length;
  const singles = requests.filter((url) => url.startsWith("/api/host/result/")).length;
  t.ok(batches > 0, `some results were posted together (${batches} batches, ${singles} single posts for 96 calls)`);
  t.ok(batches + singles < 96, "fewer result requests than calls");
});

t.test("one result the server refuses does not hold up the others posted with it", async (t) => {
  const dir = await tempDir(t);
  // All twelve answer in the same turn of the event loop (so their results go in one batch); one
  // result carries a NUL byte, which the server refuses (and with it the whole batch).
  let started = 0;
  let allStarted!: () => void;
  const barrier = new Promise<void>((resolve) => (allStarted = resolve));
  const echo = defineLocalTool({
    name: "echo_text",
    description: "Echoes its text",
    class: "read",
    input: Type.Object({ text: Type.String() }, { additionalProperties: false }),
    async run(input) {
      if (++started === 12) allStarted();
      await barrier;
      return { text: input.text === "bad" ? "nul\u0000byte" : input.text };
    },
  });
  const { call } = await runtimeDevice(t, [echo], dir);
  const texts = Array.from({ length: 12 }, (_, n) => (n === 5 ? "bad" : `text ${n}`));
  const replies = await Promise.all(texts.map((text) => call("echo_text", { text })));
  for (const [n, reply] of replies.entries()) {
    if (n === 5) t.match(reply, { status: 502, body: { code: "DEVICE_RESULT_INVALID" } }, "the refused result ends its own call at once");
    else t.match(reply, { status: 200, body: { result: { text: texts[n] } } }, `call ${n} got its result`);
  }
});
