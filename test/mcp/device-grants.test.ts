import t from "tap";
import { connectedDevice, pair, ScriptedDevice, startHostServer } from "../host/helpers.js";
import { bearer, mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";
import { authoriseClient } from "../helpers/oauth.js";
import { connectV2, type Revision } from "./v2.js";

/**
 * A credential limited to chosen devices (issue 27): it neither lists nor reaches any other device,
 * through /mcp at either revision or through the JSON API; a removed device leaves it with none.
 */
const app = await startHostServer(t);
const { url } = app;
const { owner, deviceId: alpha, device: alphaDevice } = await connectedDevice(t, url, "alpha");
const paired = await pair(owner, "beta");
const beta = paired.deviceId;
const betaDevice = new ScriptedDevice(url, beta, paired.token);
if ((await betaDevice.hello()).status !== 200) throw new Error("hello failed");
await betaDevice.connect();
t.teardown(() => betaDevice.disconnect());
const seen: Record<string, string[]> = { alpha: [], beta: [] };
alphaDevice.serve((call) => (seen.alpha!.push(`${call.tool}:${call.mode}`), call.mode === "plan" ? { diff: "+x", summary: "Write" } : { size: 1 }));
betaDevice.serve((call) => (seen.beta!.push(`${call.tool}:${call.mode}`), call.mode === "plan" ? { diff: "+x", summary: "Write" } : { size: 2 }));
const { deviceId: theirs } = await connectedDevice(t, url, "someone-elses");

const mint = (body: Record<string, unknown>) => owner.post("/api/tokens", { name: "limited", scopes: ["host:call"], ...body });

t.test("bad grants are refused with a 400 and mint nothing", async (t) => {
  for (const [grants, code] of [
    [{ devices: ["no-such-device"] }, "UNKNOWN_DEVICE"],
    [{ devices: [theirs] }, "UNKNOWN_DEVICE"],
    [{ devices: [alpha, theirs] }, "UNKNOWN_DEVICE"],
    [{ devices: [] }, "INVALID_INPUT"],
    [{ planets: [alpha] }, "INVALID_INPUT"],
    [{ devices: alpha }, "INVALID_INPUT"],
  ] as const) {
    const response = await mint({ name: "refused", grants });
    t.equal(response.status, 400, JSON.stringify(grants));
    t.match(await readJson(response), { code }, JSON.stringify(grants));
  }
  const tokens = (await readJson(await owner.get("/api/tokens"))).tokens as { name: string }[];
  t.notOk(
    tokens.some((token) => token.name === "refused"),
    "no token was made",
  );
});

// Set-up outside any subtest asserts nothing (an assertion there ends tap's root test early).
const limited = await readJson(await mint({ grants: { devices: [alpha] } }));
const limitedToken: string = limited.token;

t.test("the new token says what it is limited to", async (t) => {
  t.same(limited.grants, { devices: [alpha] });
  t.match(limitedToken, /^sk_/);
});

t.test("the token list shows the grant; an unlimited token has none", async (t) => {
  const open = await mintToken(owner, { name: "open", scopes: ["host:call"] });
  t.ok(open);
  const tokens = (await readJson(await owner.get("/api/tokens"))).tokens as { name: string; grants?: unknown }[];
  t.same(tokens.find((token) => token.name === "limited")?.grants, { devices: [alpha] });
  t.equal(tokens.find((token) => token.name === "open")?.grants, undefined);
});

t.test("JSON API: the limited token sees and calls only its device", async (t) => {
  const get = (path: string) => fetch(url + path, { headers: bearer(limitedToken) });
  const call = (deviceId: string, tool = "stat") =>
    fetch(`${url}/api/host/calls`, {
      method: "POST",
      headers: { ...bearer(limitedToken), "content-type": "application/json" },
      body: JSON.stringify({ deviceId, tool, input: { path: "a" } }),
    });
  t.same(
    (await readJson(await get("/api/host/devices"))).devices.map((d: { id: string }) => d.id),
    [alpha],
  );
  t.equal((await get(`/api/host/devices/${beta}`)).status, 404);
  t.equal((await get(`/api/host/devices/${alpha}`)).status, 200);
  seen.beta!.length = 0;
  const refused = await call(beta);
  t.equal(refused.status, 404);
  t.match(await readJson(refused), { code: "DEVICE_NOT_FOUND" });
  t.equal((await call(beta, "write_file")).status, 404);
  t.same(seen.beta, [], "the other device never saw a call");
  const ok = await call(alpha);
  t.equal(ok.status, 200);
  t.match(await readJson(ok), { result: { size: 1 } });
});

t.test("JSON API: the owner's proposal on another device is not the limited token's to read", async (t) => {
  const proposed = await owner.post("/api/host/calls", { deviceId: beta, tool: "write_file", input: { path: "a", content: "x" } });
  t.equal(proposed.status, 202);
  const { proposalId } = await readJson(proposed);
  const list = await readJson(await fetch(`${url}/api/host/proposals`, { headers: bearer(limitedToken) }));
  t.same(list.proposals, [], "not listed");
  t.equal(list.total, 0, "nor counted");
  t.equal((await fetch(`${url}/api/host/proposals/${proposalId}`, { headers: bearer(limitedToken) })).status, 404);
  t.equal((await owner.get(`/api/host/proposals/${proposalId}`)).status, 200, "the owner still sees it");
});

for (const revision of ["2026-07-28", "2025-11-25"] as Revision[]) {
  t.test(`/mcp at ${revision}: lists and calls only the granted device`, async (t) => {
    const client = await connectV2(t, url, limitedToken, revision);
    const listed = await client.callTool({ name: "list_devices", arguments: {} });
    t.same(
      (listed.structuredContent as { devices: { id: string }[] }).devices.map((d) => d.id),
      [alpha],
    );
    const text = JSON.stringify((await client.listTools()).tools);
    t.ok(text.includes(alpha), "the catalog names the granted device");
    t.notOk(text.includes(beta), "and never the other");
    seen.beta!.length = 0;
    for (const reference of [beta, "beta"]) {
      t.match(
        await client.callTool({ name: "stat", arguments: { device: reference, path: "a" } }),
        { isError: true, structuredContent: { code: "DEVICE_NOT_FOUND" } },
        reference,
      );
      t.match(await client.callTool({ name: "write_file", arguments: { device: reference, path: "a", content: "x" } }), {
        isError: true,
        structuredContent: { code: "DEVICE_NOT_FOUND" },
      });
    }
    t.same(seen.beta, [], "the other device never saw a call");
    t.notOk((await client.callTool({ name: "stat", arguments: { device: alpha, path: "a" } })).isError);
    const pending = (await readJson(await owner.get("/api/host/proposals"))).proposals as { id: string; deviceId: string }[];
    const onBeta = pending.find((p) => p.deviceId === beta);
    t.ok(onBeta, "the owner has a proposal on the other device");
    t.match(await client.callTool({ name: "proposal_status", arguments: { proposalId: onBeta!.id } }), {
      isError: true,
      structuredContent: { code: "PROPOSAL_NOT_FOUND" },
    });
  });
}

t.test("the limited token's listen stream hears changes of its device only", async (t) => {
  const count = async (token: string) => {
    const client = await connectV2(t, url, token, "2026-07-28");
    const heard = { changes: 0 };
    client.setNotificationHandler("notifications/tools/list_changed", () => {
      heard.changes += 1;
    });
    const subscription = await client.listen({ toolsListChanged: true });
    t.teardown(() => subscription.close());
    return heard;
  };
  const limitedHeard = await count(limitedToken);
  // An unlimited token's stream beside it: both are written in the same tick for every change, so once this
  // one has heard both changes, a leaked change of the other device would have reached the limited one too.
  const openHeard = await count(await mintToken(owner, { name: "listener", scopes: ["host:call"] }));
  t.equal((await betaDevice.hello()).status, 200);
  t.equal((await alphaDevice.hello()).status, 200);
  await eventually(() => openHeard.changes >= 2 && limitedHeard.changes >= 1, 20_000, "both streams heard the changes");
  t.equal(openHeard.changes, 2, "the unlimited stream heard both devices");
  t.equal(limitedHeard.changes, 1, "the limited stream heard only its own device");
});

t.test("an unlimited token still reaches every device (no grant is all devices)", async (t) => {
  const open = await mintToken(owner, { name: "everything", scopes: ["host:call"] });
  const client = await connectV2(t, url, open, "2026-07-28");
  const listed = await client.callTool({ name: "list_devices", arguments: {} });
  t.same((listed.structuredContent as { devices: { id: string }[] }).devices.map((d) => d.id).sort(), [alpha, beta].sort());
  t.notOk((await client.callTool({ name: "stat", arguments: { device: beta, path: "a" } })).isError);
});

t.test("a removed device leaves a token limited to it with no device, never all of them", async (t) => {
  const onlyBeta = await readJson(await mint({ name: "beta only", grants: { devices: [beta] } }));
  t.same(onlyBeta.grants, { devices: [beta] });
  t.equal((await owner.delete(`/api/host/devices/${beta}`)).status, 204);
  t.same((await readJson(await fetch(`${url}/api/host/devices`, { headers: bearer(onlyBeta.token) }))).devices, []);
  const client = await connectV2(t, url, onlyBeta.token, "2026-07-28");
  t.same(
    (await client.listTools()).tools.map((tool) => tool.name),
    ["list_devices", "proposal_status"],
    "no device tool is listed",
  );
  t.match(await client.callTool({ name: "stat", arguments: { device: alpha, path: "a" } }), { isError: true, structuredContent: { code: "DEVICE_NOT_FOUND" } });
  const call = await fetch(`${url}/api/host/calls`, {
    method: "POST",
    headers: { ...bearer(onlyBeta.token), "content-type": "application/json" },
    body: JSON.stringify({ deviceId: alpha, tool: "stat", input: {} }),
  });
  t.equal(call.status, 404);
  // The removed device can no longer be chosen.
  t.match(await readJson(await mint({ grants: { devices: [beta] } })), { code: "UNKNOWN_DEVICE" });
});

t.test("the settings form offers the devices and makes a limited token", async (t) => {
  const page = await (await owner.get("/settings/tokens")).text();
  t.match(page, `name="grants.devices" value="${alpha}"`);
  const response = await owner.request("POST", "/settings/tokens", {
    body: new URLSearchParams([
      ["name", "from form"],
      ["expiresInDays", "30"],
      ["scopes", "host:call"],
      ["grants.devices", alpha],
    ]).toString(),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  t.equal(response.status, 200);
  const html = await response.text();
  const token = /id="new-token"[^>]*value="(sk_[^"]+)"/.exec(html)?.[1];
  t.ok(token, "the new token is shown");
  t.same(
    (await readJson(await fetch(`${url}/api/host/devices`, { headers: bearer(token!) }))).devices.map((d: { id: string }) => d.id),
    [alpha],
  );
  const refused = await owner.request("POST", "/settings/tokens", {
    body: new URLSearchParams([
      ["name", "bad"],
      ["expiresInDays", "30"],
      ["grants.devices", theirs],
    ]).toString(),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  t.equal(refused.status, 400);
  t.match(await refused.text(), "You have no device with the id");
});

t.test("OAuth: the consent page offers the devices, and a client allowed one reaches only that one", async (t) => {
  const client = await authoriseClient(url, owner, "Limited agent", { devices: alpha });
  const mcp = await connectV2(t, url, client.accessToken, "2026-07-28");
  const listed = await mcp.callTool({ name: "list_devices", arguments: {} });
  t.same(
    (listed.structuredContent as { devices: { id: string }[] }).devices.map((d) => d.id),
    [alpha],
  );
  t.notOk((await mcp.callTool({ name: "stat", arguments: { device: alpha, path: "a" } })).isError);
  const settings = await (await owner.get("/settings/mcp", { accept: "text/html" })).text();
  t.match(settings, /Limited agent[\s\S]*?<dd class="grant-devices">alpha<\/dd>/, "the MCP settings page says which devices the client may use");
  // Another user's device (or any id the owner does not have) is refused on the page: no code is issued.
  await t.rejects(authoriseClient(url, owner, "Greedy agent", { devices: theirs }), /consent: 400/);
  // Consenting again without choosing widens it back to every device, as the owner chose.
  const again = await authoriseClient(url, owner, "Open agent");
  const open = await connectV2(t, url, again.accessToken, "2025-11-25");
  t.ok(((await open.callTool({ name: "list_devices", arguments: {} })).structuredContent as { devices: unknown[] }).devices.length >= 1);
});

t.test("the consent page lists the owner's devices to choose from", async (t) => {
  const { owner: other, deviceId } = await connectedDevice(t, url, "consent-box");
  const registered = await readJson(
    await fetch(`${url}/api/auth/oauth2/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "Looker",
        redirect_uris: ["http://127.0.0.1:9/callback"],
        token_endpoint_auth_method: "none",
        grant_types: ["authorization_code"],
        response_types: ["code"],
      }),
    }),
  );
  const query = new URLSearchParams({
    response_type: "code",
    client_id: registered.client_id,
    redirect_uri: "http://127.0.0.1:9/callback",
    scope: "host:call",
    state: "s",
    code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
    code_challenge_method: "S256",
    resource: `${url}/mcp`,
  });
  const answer = await readJson(await other.get(`/api/auth/oauth2/authorize?${query}`));
  const page = await (await other.get(answer.url, { accept: "text/html" })).text();
  t.match(page, `name="devices" value="${deviceId}"`);
  t.match(page, "consent-box");
  t.notMatch(page, alpha, "never another user's device");
});
