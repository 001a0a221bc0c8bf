/**
 * Text PostgreSQL cannot store (NUL, lone surrogates) and absurdly nested JSON are refused at the edge
 * with a 400 `{ code, message }` (a rendered 400 for pages), in every place the attack found a 500.
 */
import t, { type Test } from "tap";
import { exceedsJsonDepth } from "../../src/http/input-guard.js";
import { startTestApp } from "../helpers/app.js";
import { bearer, mintToken, newUser } from "../helpers/auth.js";
import { TestClient } from "../helpers/client.js";
import { pair, ScriptedDevice, writeTool, statTool } from "../host/helpers.js";

const { url, app } = await startTestApp(t);
const admin = await newUser(url, "nul-admin", { adminOf: app });
const owner = admin.client;
const device = await pair(owner, "nul-device");
const scripted = new ScriptedDevice(url, device.deviceId, device.token);
t.equal((await scripted.hello([statTool, writeTool])).status, 200, "a clean hello is accepted");

const NUL = "a\u0000b";
const LONE_SURROGATE = "a\ud800b";

async function refused(t: Test, response: Response, what: string, code = "INVALID_CHARACTERS") {
  t.equal(response.status, 400, `${what}: 400`);
  const text = await response.text();
  const json = JSON.parse(text) as { code: string; message: string };
  t.equal(json.code, code, `${what}: ${code}`);
  t.ok(json.message.length > 0, `${what}: says why (${json.message})`);
}

async function refusedPage(t: Test, response: Response, what: string) {
  t.equal(response.status, 400, `${what}: 400`);
  t.match(response.headers.get("content-type") ?? "", /text\/html/, `${what}: a page`);
  t.match(await response.text(), /NUL character or invalid Unicode/, `${what}: says why`);
}

t.test("ids in paths", async (t) => {
  await refused(t, await owner.get("/api/host/devices/%00"), "GET /api/host/devices/%00");
  await refused(t, await owner.delete("/api/host/devices/%00"), "DELETE /api/host/devices/%00");
  await refused(t, await owner.get("/api/host/proposals/%00"), "GET /api/host/proposals/%00");
  await refused(t, await owner.delete("/api/tokens/%00"), "DELETE /api/tokens/%00");
  await refused(t, await owner.post("/api/admin/users/%00/reactivate"), "POST /api/admin/users/%00/reactivate");
  await refused(t, await owner.get("/api/host/devices/a%ED%A0%80b"), "invalid UTF-8 in the path (the router refuses it)", "BAD_URL");
  await refused(t, await owner.get("/api/host/devices?x=%00"), "NUL in the query");
  // Invalid UTF-8 in a query value is kept as its literal %-text, which is harmless.
  t.equal((await owner.get("/api/host/devices?x=a%ED%A0%80b")).status, 200, "invalid UTF-8 in the query stays text");
  const page = await owner.request("GET", "/devices/%00/tools/x", { headers: { accept: "text/html" } });
  await refusedPage(t, page, "GET /devices/%00/tools/x");
});

t.test("query strings, the auth bridge's included", async (t) => {
  await refused(t, await fetch(`${url}/api/auth/verify-email?token=%00`), "verify-email ?token=%00");
  await refused(t, await fetch(`${url}/api/auth/reset-password/%00?callbackURL=/reset-password`), "reset-password/%00");
  await refusedPage(t, await fetch(`${url}/reset-password?token=a%00`, { headers: { accept: "text/html" } }), "/reset-password?token=a%00");
});

t.test("token names, API and form", async (t) => {
  await refused(t, await owner.post("/api/tokens", { name: NUL }), "API: NUL");
  await refused(t, await owner.post("/api/tokens", { name: LONE_SURROGATE }), "API: lone surrogate");
  const form = await owner.request("POST", "/settings/tokens", { form: { name: NUL }, headers: { accept: "text/html" } });
  await refusedPage(t, form, "form: NUL");
  const list = (await (await owner.get("/api/tokens")).json()) as { tokens: unknown[] };
  t.equal(list.tokens.length, 0, "no token was created");
});

t.test("better-auth's update-user and sign-up", async (t) => {
  await refused(t, await owner.post("/api/auth/update-user", { name: NUL }), "update-user name");
  await refused(
    t,
    await new TestClient(url).post("/api/auth/sign-up/email", { name: "x", email: "nul@example.com", password: NUL + "long enough" }),
    "sign-up password",
  );
  const me = (await (await owner.get("/api/me")).json()) as { user: { name: string } };
  t.equal(me.user.name, "nul-admin", "the name is unchanged");
});

t.test("hello fields: description, roots, agent", async (t) => {
  const hello = (body: unknown) =>
    fetch(`${url}/api/host/hello`, { method: "POST", headers: scripted.headers({ "content-type": "application/json" }), body: JSON.stringify(body) });
  await refused(t, await hello({ tools: [{ ...statTool, description: NUL }], roots: ["/r"] }), "tool description");
  await refused(t, await hello({ tools: [statTool], roots: [`/r/${NUL}`] }), "roots");
  await refused(t, await hello({ tools: [statTool], roots: ["/r"], agent: NUL }), "agent");
  await refused(t, await hello({ tools: [statTool], roots: ["/r"], agent: LONE_SURROGATE }), "agent (lone surrogate)");
});

t.test("a mutate call's input, and a device's plan diff", async (t) => {
  await refused(t, await owner.post("/api/host/calls", { deviceId: device.deviceId, tool: "write_file", input: { path: "a", content: NUL } }), "call input");
  t.equal((await scripted.hello([statTool, writeTool])).status, 200);
  await scripted.connect();
  t.teardown(() => scripted.disconnect());
  const call = owner.post("/api/host/calls", { deviceId: device.deviceId, tool: "write_file", input: { path: "a", content: "x" }, timeoutMs: 3_000 });
  const planned = await scripted.nextCall();
  await refused(t, await scripted.postResult({ id: planned.id, ok: true, result: { diff: `+${NUL}`, summary: "s" } }), "plan diff");
  const answer = await call;
  t.not(answer.status, 500, `the caller is told the device gave no usable answer (${answer.status})`);
  await answer.arrayBuffer();
  const proposals = (await (await owner.get("/api/host/proposals")).json()) as { proposals: unknown[] };
  t.equal(proposals.proposals.length, 0, "nothing was stored");
});

t.test("JSON nested 5,000 deep is refused before it is parsed", async (t) => {
  const deep = "[".repeat(5_000) + "]".repeat(5_000);
  const deepObject = '{"a":'.repeat(5_000) + "1" + "}".repeat(5_000);
  for (const path of ["/api/auth/sign-in/email", "/api/auth/update-user", "/api/tokens", "/api/host/calls"]) {
    await refused(t, await owner.request("POST", path, { body: deep, headers: { "content-type": "application/json" } }), `${path} (arrays)`, "JSON_TOO_DEEP");
    await refused(
      t,
      await owner.request("POST", path, { body: deepObject, headers: { "content-type": "application/json" } }),
      `${path} (objects)`,
      "JSON_TOO_DEEP",
    );
  }
  const token = await mintToken(owner, { name: "deep" });
  const asToken = await fetch(`${url}/api/host/calls`, { method: "POST", headers: { ...bearer(token), "content-type": "application/json" }, body: deep });
  await refused(t, asToken, "token caller", "JSON_TOO_DEEP");
  // Brackets inside strings are text, not depth.
  const ok = await owner.post("/api/tokens", { name: "[[[[".repeat(20) });
  t.equal(ok.status, 201, "brackets in a string are fine");
});

t.test("the server is still well", async (t) => {
  t.equal((await fetch(`${url}/healthz`)).status, 200);
});

t.test("the depth scan counts brackets outside strings only, escapes included", async (t) => {
  const cases: Array<[string, number, boolean]> = [
    ["[[[]]]", 2, true],
    ["[[[]]]", 3, false],
    [JSON.stringify({ a: '[[[[\\"[[[' }), 1, false],
    [JSON.stringify(["\\"]), 0, true],
    ['"\\\\"[[', 1, true],
    ['"\\"[["', 1, false],
    ['["unterminated [[[', 1, false],
  ];
  for (const [text, limit, expected] of cases) t.equal(exceedsJsonDepth(text, limit), expected, `${text} over ${limit}`);
});
