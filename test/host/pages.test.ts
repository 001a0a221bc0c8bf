import t from "tap";
import { readEventStream } from "../../src/device/sse.js";
import { diffLines, formFields, readForm } from "../../src/web/schema-form.js";
import { connectedDevice, ScriptedDevice, signedIn, startHostServer } from "./helpers.js";
import { readJson } from "../helpers/client.js";

const DIFF = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n keep\n-<b>old</b>\n+new\n";

t.test("/devices over HTTP: guarded, works without JavaScript, htmx fragments, live events", async (t) => {
  const server = await startHostServer(t);
  const anonymous = await fetch(`${server.url}/devices`, { redirect: "manual" });
  t.equal(anonymous.status, 302, "signed-out visitors are sent to sign in");
  t.equal(anonymous.headers.get("location"), "/login?next=%2Fdevices", "and back here after");

  const owner = await signedIn(server.url);
  const page = await owner.get("/devices");
  t.equal(page.status, 200);
  const html = await page.text();
  t.match(html, /<h1>Devices<\/h1>/);
  t.match(html, /No devices yet/);
  t.match(html, /hx-get="\/devices\/panel\/live" hx-trigger="load"/);
  t.match(html, /<a href="\/devices" aria-current="page">Devices<\/a>/, "the navigation marks the page");
  t.match(page.headers.get("content-security-policy"), /script-src 'self'/);

  // Pair without JavaScript: a form post renders the whole page with the code and command.
  const paired = await owner.request("POST", "/devices/pair", { form: {} });
  t.equal(paired.status, 200);
  const pairedHtml = await paired.text();
  const code = /class="pair-code"><span class="visually-hidden">Pairing code: <\/span>([A-Z0-9-]+)</.exec(pairedHtml)?.[1];
  t.ok(code, "the code is shown");
  t.match(
    pairedHtml,
    new RegExp(`TETHER_SERVER_URL=${server.url} TETHER_PAIRING_CODE=${code}`),
    "with the settings to start it with (install-commands.test.ts runs the whole command)",
  );

  // The live stream tells the page that devices changed when one enrolls and connects.
  const controller = new AbortController();
  const events = await fetch(`${server.url}/devices/events`, { headers: { cookie: owner.cookieHeader }, signal: controller.signal });
  t.equal(events.headers.get("content-type"), "text/event-stream; charset=utf-8");
  const seen: string[] = [];
  const reading = (async () => {
    try {
      for await (const message of readEventStream(events.body!)) seen.push(message.event);
    } catch {
      /* aborted */
    }
  })();

  const enrolled = await fetch(`${server.url}/api/host/enroll`, {
    method: "POST",
    headers: { "content-type": "application/json", "tether-protocol": "1" },
    body: JSON.stringify({ code, name: "<script>alert(1)</script>", platform: "linux-x64" }),
  });
  const { deviceId, token } = await readJson(enrolled);
  const device = new ScriptedDevice(server.url, deviceId, token);
  await device.hello();
  await device.connect();
  t.teardown(() => device.disconnect());
  device.serve((call) =>
    call.mode === "plan" ? { diff: DIFF, summary: "edit notes.txt" } : call.mode === "apply" ? { written: true } : { size: 3, path: call.input.path },
  );

  const panel = await owner.get("/devices/panel/devices", { "hx-request": "true" });
  const panelHtml = await panel.text();
  t.notMatch(panelHtml, /<html/, "a fragment, not a page");
  t.match(panelHtml, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/, "device names are escaped");
  t.notMatch(panelHtml, /<script>alert/);
  t.match(panelHtml, /badge-success">Online/);
  t.match(panelHtml, /hx-get="\/devices\/[0-9a-f-]+\/tools\/stat"/);

  // The form generated from the tool's schema, and a run.
  const form = await (await owner.get(`/devices/${deviceId}/tools/stat`, { "hx-request": "true" })).text();
  t.match(form, /name="arg.path" type="text"|name="arg.path"/);
  const run = await owner.request("POST", `/devices/${deviceId}/tools/stat`, { form: { "arg.path": "a.txt" }, headers: { "hx-request": "true" } });
  t.equal(run.status, 200);
  t.match(await run.text(), /&quot;path&quot;: &quot;a.txt&quot;/);
  const missing = await owner.request("POST", `/devices/${deviceId}/tools/stat`, { form: {}, headers: { "hx-request": "true" } });
  t.equal(missing.status, 400);
  t.match(await missing.text(), /Path: this field is required/);

  // A mutate tool proposes; the diff is shown with its lines marked, escaped.
  const proposed = await owner.request("POST", `/devices/${deviceId}/tools/write_file`, {
    form: { "arg.path": "notes.txt", "arg.content": "new\n" },
    headers: { "hx-request": "true" },
  });
  t.equal(proposed.status, 202);
  const proposedHtml = await proposed.text();
  t.match(proposedHtml, /<del class="diff-line diff-removed">-&lt;b&gt;old&lt;\/b&gt;<\/del>/);
  t.match(proposedHtml, /<ins class="diff-line diff-added">\+new<\/ins>/);
  const pending = await (await owner.get("/devices/panel/proposals", { "hx-request": "true" })).text();
  const proposalId = /id="proposal-([0-9a-f-]+)"/.exec(pending)?.[1];
  t.ok(proposalId);
  t.match(pending, /hx-confirm="Apply this change on/);

  // Approve without JavaScript: redirected to the proposal's page, which says what happened; /devices lists it as decided.
  const approved = await owner.request("POST", `/devices/proposals/${proposalId}/approve`, { form: {} });
  t.equal(approved.status, 303);
  t.equal(approved.headers.get("location"), `/devices/proposals/${proposalId}?notice=applied`);
  const decidedPage = await (await owner.get(`/devices/proposals/${proposalId}?notice=applied`)).text();
  t.match(decidedPage, /role="status">Applied: notes.txt written \(\+1 −1 lines\), on “&lt;script&gt;/);
  const after = await (await owner.get("/devices")).text();
  t.match(after, /No changes are waiting/);
  t.match(after, /Recent decisions/);
  const twice = await owner.request("POST", `/devices/proposals/${proposalId}/approve`, { form: {}, headers: { "hx-request": "true" } });
  t.equal(twice.status, 409);
  t.match(await twice.text(), /Not applied: This proposal was already decided \(applied\) \(ALREADY_DECIDED\)/);

  // Revoke through the page (htmx): the panel comes back without it.
  const confirm = await owner.get(`/devices/${deviceId}/revoke`);
  t.match(await confirm.text(), /Revoke “&lt;script&gt;/);
  const revoked = await owner.request("POST", `/devices/${deviceId}/revoke`, { form: {}, headers: { "hx-request": "true" } });
  t.equal(revoked.status, 200);
  t.match(await revoked.text(), /revoked\. Its credential no longer works/);
  t.same(await device.next("close"), { reason: "revoked", message: "This device's credential was revoked; pair it again" });

  controller.abort();
  await reading;
  t.same(seen.slice(0, 2), ["devices-changed", "proposals-changed"], "on connecting, each panel is told to fetch itself once");
  t.ok(seen.slice(2).includes("devices-changed"), "devices-changed was pushed when the device came");
  t.ok(seen.slice(2).includes("proposals-changed"), "proposals-changed was pushed when a change was proposed");

  // Someone else's device or proposal is not found; a token cannot pair from the page.
  const stranger = await signedIn(server.url);
  t.equal((await stranger.get(`/devices/${deviceId}/tools/stat`)).status, 404);
  t.equal((await stranger.request("POST", `/devices/proposals/${proposalId}/reject`, { form: {}, headers: { "hx-request": "true" } })).status, 404);
  const { token: apiToken } = await readJson(await owner.post("/api/tokens", { name: "t", scopes: ["host:call"] }));
  const byToken = await fetch(`${server.url}/devices/pair`, {
    method: "POST",
    redirect: "manual",
    headers: { authorization: `Bearer ${apiToken}`, accept: "text/html" },
  });
  t.equal(byToken.status, 302, "pages are for browsers: a token is sent to sign in");
  t.equal(byToken.headers.get("location"), "/login");
});

t.test("forms from schemas, and diffs, as the page reads them", async (t) => {
  const schema = {
    type: "object",
    properties: {
      path: { type: "string", maxLength: 4096 },
      recursive: { type: "boolean", default: false },
      limit: { type: "integer", minimum: 1, maximum: 1000 },
      algorithm: { type: "string", enum: ["sha256", "md5"] },
      include: { type: "array", items: { type: "string" } },
      edits: { type: "array", items: { type: "object" } },
      content: { type: "string" },
    },
    required: ["path", "edits"],
  };
  const fields = formFields(schema);
  t.same(
    fields.map((f) => [f.name, f.kind]),
    [
      ["path", "text"],
      ["recursive", "checkbox"],
      ["limit", "number"],
      ["algorithm", "select"],
      ["include", "lines"],
      ["edits", "json"],
      ["content", "textarea"],
    ],
  );
  t.same(
    readForm(schema, {
      "arg.path": "src",
      "arg.recursive": "true",
      "arg.limit": "5",
      "arg.algorithm": "md5",
      "arg.include": "*.ts\n\n*.js\n",
      "arg.edits": '[{"find":"a","replace":"b"}]',
      "arg.content": "x\r\ny\r\n",
    }),
    {
      ok: true,
      input: { path: "src", recursive: true, limit: 5, algorithm: "md5", include: ["*.ts", "*.js"], edits: [{ find: "a", replace: "b" }], content: "x\ny\n" },
    },
  );
  t.match(readForm(schema, { "arg.path": "x", "arg.edits": "[", "arg.limit": "" }), { ok: false, field: "arg.edits", error: /Edits: not valid JSON/ });
  t.match(readForm(schema, { "arg.path": "x", "arg.edits": "[]", "arg.limit": "1.5" }), { ok: false, field: "arg.limit", error: /not a whole number/ });
  t.match(readForm(schema, { "arg.edits": "[]" }), { ok: false, field: "arg.path" });

  t.same(
    diffLines("--- a\n+++ b\n@@ -1,3 +1,3 @@\n ctx\n---x\n+++y\n ctx\n--- c\n+++ d\n@@ -1 +1 @@\n-1\n+2\n").map((l) => l.kind),
    ["header", "header", "hunk", "context", "removed", "added", "context", "header", "header", "hunk", "removed", "added"],
    "a removed '--x' inside a hunk is a removed line, a later '---' is the next file's header",
  );
});

t.test("the page answers a refusal with the API's status, not a blanket 409", async (t) => {
  const server = await startHostServer(t);
  const { owner, deviceId, device } = await connectedDevice(t, server.url);

  // A device that never answers: fill its calls in flight (64) through the API, and keep them waiting.
  const waiting = Array.from({ length: 64 }, () => owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "a" }, timeoutMs: 600_000 }));
  for (let taken = 0; taken < 64; taken++) await device.nextCall();

  const api = await owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "a" } });
  t.equal(api.status, 429, "the API says busy");
  t.equal((await readJson(api)).code, "DEVICE_BUSY");
  const page = await owner.request("POST", `/devices/${deviceId}/tools/stat`, { form: { "arg.path": "a" }, headers: { "hx-request": "true" } });
  t.equal(page.status, 429, "the page says busy too");
  t.match(await page.text(), /DEVICE_BUSY/);

  // The device goes away: the waiting calls end (502), and the tool panel then says offline like the API.
  device.disconnect();
  t.same([...new Set((await Promise.all(waiting)).map((response) => response.status))], [502]);
  const offlineApi = await owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "a" } });
  const offlinePage = await owner.request("POST", `/devices/${deviceId}/tools/stat`, { form: { "arg.path": "a" }, headers: { "hx-request": "true" } });
  t.equal(offlinePage.status, offlineApi.status, `offline: both ${offlineApi.status}`);
});
