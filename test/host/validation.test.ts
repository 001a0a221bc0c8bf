import t from "tap";
import { pair, protocolHeaders, signedIn, startHostServer } from "./helpers.js";
import { readJson } from "../helpers/client.js";

/** Bad input to every host endpoint: a clear 4xx with `{ code, message }`, never a 500. */
t.test("bad input to every endpoint is a clear 4xx", async (t) => {
  const server = await startHostServer(t);
  const owner = await signedIn(server.url);
  const { token } = await pair(owner);
  const device = { authorization: `Bearer ${token}`, ...protocolHeaders };
  const session = { cookie: owner.cookieHeader, origin: server.url };

  type Case = [label: string, method: string, path: string, body: string | undefined, headers: Record<string, string>, status: number, code?: string];
  const jsonType = { "content-type": "application/json" };
  const body = (value: unknown) => JSON.stringify(value);
  const tool = { name: "stat", description: "d", inputSchema: { type: "object" }, class: "read" };
  /** A hello announcing `tool` with `change` applied: each is refused as invalid input. */
  const badTool = (label: string, change: Record<string, unknown>): Case => [
    `hello: ${label}`,
    "POST",
    "/api/host/hello",
    body({ tools: [{ ...tool, ...change }], roots: [] }),
    { ...device, ...jsonType },
    400,
    "INVALID_INPUT",
  ];

  const cases: Case[] = [
    // Enrollment (no credential, only the protocol header).
    ["enroll: empty body", "POST", "/api/host/enroll", "", { ...protocolHeaders, ...jsonType }, 400, "INVALID_JSON"],
    ["enroll: not JSON", "POST", "/api/host/enroll", "{code:", { ...protocolHeaders, ...jsonType }, 400, "INVALID_JSON"],
    ["enroll: null", "POST", "/api/host/enroll", "null", { ...protocolHeaders, ...jsonType }, 400, "INVALID_INPUT"],
    [
      "enroll: missing name",
      "POST",
      "/api/host/enroll",
      body({ code: "22222-22222", platform: "x" }),
      { ...protocolHeaders, ...jsonType },
      400,
      "INVALID_INPUT",
    ],
    [
      "enroll: code a number",
      "POST",
      "/api/host/enroll",
      body({ code: 5, name: "n", platform: "x" }),
      { ...protocolHeaders, ...jsonType },
      400,
      "INVALID_INPUT",
    ],
    [
      "enroll: name too long",
      "POST",
      "/api/host/enroll",
      body({ code: "22222-22222", name: "n".repeat(101), platform: "x" }),
      { ...protocolHeaders, ...jsonType },
      400,
      "INVALID_INPUT",
    ],
    ["enroll: text/plain", "POST", "/api/host/enroll", "code", { ...protocolHeaders, "content-type": "text/plain" }, 400, "INVALID_INPUT"],
    [
      "enroll: form-encoded",
      "POST",
      "/api/host/enroll",
      "code=x",
      { ...protocolHeaders, "content-type": "application/x-www-form-urlencoded" },
      400,
      "INVALID_INPUT",
    ],
    ["enroll: xml", "POST", "/api/host/enroll", "<x/>", { ...protocolHeaders, "content-type": "application/xml" }, 415],
    // Hello, stream and results (device token).
    ["hello: no token", "POST", "/api/host/hello", body({ tools: [], roots: [] }), { ...protocolHeaders, ...jsonType }, 401, "DEVICE_TOKEN_INVALID"],
    [
      "hello: not a bearer",
      "POST",
      "/api/host/hello",
      body({ tools: [], roots: [] }),
      { ...protocolHeaders, ...jsonType, authorization: "Basic abc" },
      401,
      "DEVICE_TOKEN_INVALID",
    ],
    [
      "hello: an API token is not a device token",
      "POST",
      "/api/host/hello",
      body({ tools: [], roots: [] }),
      { ...protocolHeaders, ...jsonType, authorization: `Bearer sk_${"a".repeat(43)}` },
      401,
      "DEVICE_TOKEN_INVALID",
    ],
    ["hello: tools missing", "POST", "/api/host/hello", body({ roots: [] }), { ...device, ...jsonType }, 400, "INVALID_INPUT"],
    badTool("bad class", { class: "root" }),
    badTool("bad tool name", { name: "a b" }),
    ["hello: duplicate tool", "POST", "/api/host/hello", body({ tools: [tool, tool], roots: [] }), { ...device, ...jsonType }, 400, "INVALID_INPUT"],
    badTool("schema not an object", { inputSchema: "x" }),
    badTool("tool named .", { name: "." }),
    badTool("tool named ..", { name: ".." }),
    badTool("tool name with a dot", { name: "a.b" }),
    badTool("schema not of an object", { inputSchema: { type: "string" } }),
    badTool("a null property schema", { inputSchema: { type: "object", properties: { path: null } } }),
    badTool("an enum offering null", { inputSchema: { type: "object", properties: { mode: { enum: ["a", null] } } } }),
    badTool("an anyOf holding null", { inputSchema: { type: "object", properties: { mode: { anyOf: [{ const: "a" }, null] } } } }),
    badTool("required not a list", { inputSchema: { type: "object", required: "path" } }),
    ["hello: roots not strings", "POST", "/api/host/hello", body({ tools: [], roots: [1] }), { ...device, ...jsonType }, 400, "INVALID_INPUT"],
    ["hello: extra field", "POST", "/api/host/hello", body({ tools: [], roots: [], admin: true }), { ...device, ...jsonType }, 400, "INVALID_INPUT"],
    ["stream: no token", "GET", "/api/host/stream", undefined, protocolHeaders, 401, "DEVICE_TOKEN_INVALID"],
    ["results: no id", "POST", "/api/host/results", body({ results: [{ ok: true, result: 1 }] }), { ...device, ...jsonType }, 400, "INVALID_INPUT"],
    [
      "results: ok not boolean",
      "POST",
      "/api/host/results",
      body({ results: [{ id: "x", ok: "yes", result: 1 }] }),
      { ...device, ...jsonType },
      400,
      "INVALID_INPUT",
    ],
    [
      "results: error without code",
      "POST",
      "/api/host/results",
      body({ results: [{ id: "x", ok: false, error: { message: "m" } }] }),
      { ...device, ...jsonType },
      400,
      "INVALID_INPUT",
    ],
    ["result: unknown call", "POST", "/api/host/result/x", body({ ok: true, result: null }), { ...device, ...jsonType }, 404, "UNKNOWN_CALL"],
    // The owner's API.
    ["devices: anonymous", "GET", "/api/host/devices", undefined, {}, 401, "UNAUTHENTICATED"],
    ["device: id too long", "GET", `/api/host/devices/${"x".repeat(101)}`, undefined, session, 414],
    ["device: unknown id", "GET", "/api/host/devices/nope", undefined, session, 404, "DEVICE_NOT_FOUND"],
    ["revoke: unknown id", "DELETE", "/api/host/devices/nope", undefined, session, 404, "DEVICE_NOT_FOUND"],
    ["revoke: anonymous", "DELETE", "/api/host/devices/nope", undefined, {}, 401, "UNAUTHENTICATED"],
    ["calls: anonymous", "POST", "/api/host/calls", body({ deviceId: "d", tool: "stat" }), jsonType, 401, "UNAUTHENTICATED"],
    ["calls: no deviceId", "POST", "/api/host/calls", body({ tool: "stat" }), { ...session, ...jsonType }, 400, "INVALID_INPUT"],
    ["calls: input an array", "POST", "/api/host/calls", body({ deviceId: "d", tool: "stat", input: [] }), { ...session, ...jsonType }, 400, "INVALID_INPUT"],
    ["calls: input a string", "POST", "/api/host/calls", body({ deviceId: "d", tool: "stat", input: "x" }), { ...session, ...jsonType }, 400, "INVALID_INPUT"],
    ["calls: timeout 0", "POST", "/api/host/calls", body({ deviceId: "d", tool: "stat", timeoutMs: 0 }), { ...session, ...jsonType }, 400, "INVALID_INPUT"],
    [
      "calls: a mode may not be chosen",
      "POST",
      "/api/host/calls",
      body({ deviceId: "d", tool: "stat", mode: "apply" }),
      { ...session, ...jsonType },
      400,
      "INVALID_INPUT",
    ],
    ["calls: unknown device", "POST", "/api/host/calls", body({ deviceId: "d", tool: "stat" }), { ...session, ...jsonType }, 404, "DEVICE_NOT_FOUND"],
    ["calls: not JSON", "POST", "/api/host/calls", "{", { ...session, ...jsonType }, 400, "INVALID_JSON"],
    ["approve: no id", "POST", "/api/host/approve", body({}), { ...session, ...jsonType }, 400, "INVALID_INPUT"],
    ["approve: id a number", "POST", "/api/host/approve", body({ proposalId: 7 }), { ...session, ...jsonType }, 400, "INVALID_INPUT"],
    ["approve: unknown id", "POST", "/api/host/approve", body({ proposalId: "not-a-uuid" }), { ...session, ...jsonType }, 404, "PROPOSAL_NOT_FOUND"],
    ["approve: anonymous", "POST", "/api/host/approve", body({ proposalId: "x" }), jsonType, 401, "UNAUTHENTICATED"],
    [
      "reject: unknown id",
      "POST",
      "/api/host/reject",
      body({ proposalId: "00000000-0000-0000-0000-000000000000" }),
      { ...session, ...jsonType },
      404,
      "PROPOSAL_NOT_FOUND",
    ],
    ["reject: extra field", "POST", "/api/host/reject", body({ proposalId: "x", reason: "y" }), { ...session, ...jsonType }, 400, "INVALID_INPUT"],
    ["pairing: cookie without origin", "POST", "/api/host/pairing-codes", body({}), { cookie: owner.cookieHeader, ...jsonType }, 403, "MISSING_ORIGIN"],
    ["pairing: not JSON", "POST", "/api/host/pairing-codes", "{", { ...session, ...jsonType }, 400, "INVALID_JSON"],
  ];

  for (const [label, method, path, payload, headers, status, code] of cases) {
    const response = await fetch(server.url + path, { method, headers, ...(payload !== undefined ? { body: payload } : {}) });
    const answer = await readJson(response).catch(() => undefined);
    t.equal(response.status, status, `${label}: ${status}`);
    t.ok(answer && typeof answer.code === "string" && typeof answer.message === "string" && answer.message.length > 0, `${label}: { code, message }`);
    if (code) t.equal(answer?.code, code, `${label}: ${code}`);
  }
});
