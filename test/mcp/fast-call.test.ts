import type { FastifyRequest } from "fastify";
import t from "tap";
import { fastToolCall } from "../../src/plugins/mcp/fast-call.js";
import { connectedDevice, startHostServer } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { envelope, rawModern } from "./v2.js";

/**
 * The 2026-07-28 `tools/call` fast path (fast-call.ts): it takes only requests it fully understands,
 * answers them exactly as the SDK does, and keeps every caller to their own devices when calls of
 * several credentials interleave.
 */
const app = await startHostServer(t);
const { url } = app;
const mine = await connectedDevice(t, url, "mine");
const theirs = await connectedDevice(t, url, "theirs");
const served = { mine: 0, theirs: 0 };
mine.device.serve((call) => (served.mine++, { path: call.input.path, owner: "mine" }));
theirs.device.serve((call) => (served.theirs++, { path: call.input.path, owner: "theirs" }));
const myToken = await mintToken(mine.owner, { name: "mcp", scopes: ["host:call"] });
const theirToken = await mintToken(theirs.owner, { name: "mcp", scopes: ["host:call"] });

/** A bench-shaped request as Fastify hands it over, with `change` applied to its body, params or headers. */
function shaped(change: { body?: object; params?: object; meta?: object; headers?: Record<string, string | undefined> } = {}): FastifyRequest {
  const params = { name: "stat", arguments: { device: "d", path: "." }, _meta: { ...envelope(), ...change.meta }, ...change.params };
  return {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": "tools/call",
      "mcp-name": "stat",
      ...change.headers,
    },
    body: { jsonrpc: "2.0", id: 7, method: "tools/call", params, ...change.body },
  } as unknown as FastifyRequest;
}

t.test("only a request whose every part is known takes the fast path", async (t) => {
  t.ok(fastToolCall(shaped()), "the plain call");
  t.ok(fastToolCall(shaped({ body: { id: "seven" } })), "a string id");
  t.ok(fastToolCall(shaped({ meta: { "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {} }, roots: { listChanged: true } } } })));
  const refused: Array<[string, FastifyRequest]> = [
    ["a vendor _meta key", shaped({ meta: { "com.example/trace": "x" } })],
    ["an approval retry", shaped({ params: { requestState: "s" } })],
    ["input responses", shaped({ params: { inputResponses: {} } })],
    ["URL elicitation", shaped({ meta: { "io.modelcontextprotocol/clientCapabilities": { elicitation: { url: {} } } } })],
    ["the tasks extension", shaped({ meta: { "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } } } })],
    ["an odd capability", shaped({ meta: { "io.modelcontextprotocol/clientCapabilities": { roots: { listChanged: "yes" } } } })],
    ["no capabilities", shaped({ meta: { "io.modelcontextprotocol/clientCapabilities": undefined } })],
    ["another revision in the envelope", shaped({ meta: { "io.modelcontextprotocol/protocolVersion": "2025-11-25" } })],
    ["a 2025 header", shaped({ headers: { "mcp-protocol-version": "2025-11-25" } })],
    ["a Mcp-Name that differs", shaped({ headers: { "mcp-name": "read_file" } })],
    ["no Mcp-Name", shaped({ headers: { "mcp-name": undefined } })],
    ["an Accept without SSE", shaped({ headers: { accept: "application/json" } })],
    ["a null id", shaped({ body: { id: null } })],
    ["a fractional id", shaped({ body: { id: 1.5 } })],
    ["array arguments", shaped({ params: { arguments: [] } })],
    ["an extra member", shaped({ body: { extra: 1 } })],
    ["a batch", { ...shaped(), body: [shaped().body] }],
  ];
  for (const [why, request] of refused) t.equal(fastToolCall(request), undefined, why);
});

/** The same call twice: once as the fast path takes it, once with a vendor `_meta` key, which sends it to the SDK. */
async function bothWays(token: string, name: string, args: Record<string, unknown>) {
  const answer = async (meta: Record<string, unknown>) => {
    const response = await rawModern(url, token, "tools/call", { name, arguments: args, _meta: meta });
    // Each fence has a nonce of its own; the rest must be the same.
    const body = (await response.text()).replace(/nonce=\\"[0-9a-f]+\\"/g, "nonce=N");
    return { status: response.status, type: response.headers.get("content-type"), body: JSON.parse(body) as unknown };
  };
  return { fast: await answer(envelope()), sdk: await answer({ ...envelope(), "com.example/trace": "x" }) };
}

t.test("the fast path answers as the SDK does: results, refusals, the built-in tools", async (t) => {
  const cases: Array<[string, string, Record<string, unknown>]> = [
    ["a read", "stat", { device: mine.deviceId, path: "notes.txt" }],
    ["by name", "stat", { device: "mine", path: "." }],
    ["another user's device", "stat", { device: theirs.deviceId, path: "." }],
    ["no device", "stat", { path: "." }],
    ["an unknown tool", "no_such_tool", { device: mine.deviceId }],
    ["list_devices", "list_devices", {}],
    ["proposal_status of nothing", "proposal_status", { proposalId: "nope" }],
  ];
  for (const [why, name, args] of cases) {
    const { fast, sdk } = await bothWays(myToken, name, args);
    t.equal(fast.status, 200, why);
    t.equal(fast.type, sdk.type, why);
    t.same(fast.body, sdk.body, why);
  }
});

t.test("interleaved calls of two users each reach their own device only", async (t) => {
  served.mine = served.theirs = 0;
  const call = async (token: string, device: string) => readJson(await rawModern(url, token, "tools/call", { name: "stat", arguments: { device, path: "." } }));
  const rounds = Array.from({ length: 10 }, () => [
    call(myToken, mine.deviceId),
    call(theirToken, theirs.deviceId),
    call(myToken, theirs.deviceId),
    call(theirToken, mine.deviceId),
  ]);
  const answers = await Promise.all(rounds.flat());
  for (let i = 0; i < answers.length; i += 4) {
    t.match(answers[i].result.structuredContent, { deviceId: mine.deviceId, result: /"owner": "mine"/ });
    t.match(answers[i + 1].result.structuredContent, { deviceId: theirs.deviceId, result: /"owner": "theirs"/ });
    t.match(answers[i + 2].result, { isError: true, structuredContent: { code: "DEVICE_NOT_FOUND" } });
    t.match(answers[i + 3].result, { isError: true, structuredContent: { code: "DEVICE_NOT_FOUND" } });
  }
  t.same(served, { mine: 10, theirs: 10 }, "no device saw a call of the other user");
  const listed = await Promise.all(
    [myToken, theirToken].map(async (token) => readJson(await rawModern(url, token, "tools/call", { name: "list_devices", arguments: {} }))),
  );
  t.same(
    listed.map((answer) => answer.result.structuredContent.devices.map((device: { id: string }) => device.id)),
    [[mine.deviceId], [theirs.deviceId]],
  );
});
