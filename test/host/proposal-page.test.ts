/**
 * A proposal's own page (issue 26, "Changes waiting for approval"): who proposed it (a named API token,
 * the browser), on which device and when; the MCP result and the API link to it; deciding there or on
 * /devices says what happened, and decided proposals stay listed with their outcome.
 */
import t, { type Test } from "tap";
import type { AnnouncedTool } from "../../src/protocol/index.js";
import { bearer, mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { pair, ScriptedDevice, signedIn, startHostServer, statTool } from "./helpers.js";

const server = await startHostServer(t);

const editTool: AnnouncedTool = {
  name: "edit_file",
  description: "Replace exact text in a file",
  inputSchema: {
    type: "object",
    properties: {
      path: { type: "string" },
      edits: { type: "array", items: { type: "object", properties: { oldText: { type: "string" }, newText: { type: "string" } } } },
    },
    required: ["path", "edits"],
  },
  class: "mutate",
};
const DIFF = "--- a/src/math.js\n+++ b/src/math.js\n@@ -1 +1 @@\n-const add = (a, b) => a - b;\n+const add = (a, b) => a + b;\n";

async function setUp(t: Test) {
  const owner = await signedIn(server.url);
  const { deviceId, token: deviceToken } = await pair(owner, "laptop");
  const device = new ScriptedDevice(server.url, deviceId, deviceToken);
  await device.hello([statTool, editTool]);
  await device.connect();
  t.teardown(() => device.disconnect());
  const world = { owner, deviceId, device };
  world.device.serve((call) => (call.mode === "plan" ? { diff: DIFF, summary: "Edit /home/me/src/math.js: 1 replacement" } : { path: call.input.path }));
  const token = await mintToken(world.owner, { name: "ci-bot", scopes: ["host:call"] });
  const propose = async (headers: Record<string, string> = bearer(token)) => {
    const response = await fetch(`${server.url}/api/host/calls`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ deviceId: world.deviceId, tool: "edit_file", input: { path: "src/math.js", edits: [{ oldText: "a - b", newText: "a + b" }] } }),
    });
    const body = await readJson(response);
    t.equal(response.status, 202, JSON.stringify(body));
    return body;
  };
  return { ...world, token, propose };
}

t.test("the API and the page name the token that proposed, the device, the path and the time", async (t) => {
  const { owner, propose, token, deviceId } = await setUp(t);
  const proposed = await propose();
  const url = `${server.url}/devices/proposals/${proposed.proposalId}`;
  t.equal(proposed.url, url, "POST /api/host/calls links to the proposal's page");
  const listed = await readJson(await fetch(`${server.url}/api/host/proposals`, { headers: bearer(token) }));
  t.match(listed.proposals, [{ id: proposed.proposalId, url, proposer: { actor: "token", credential: /^token:/, name: "ci-bot" }, decidedBy: null }]);

  const page = await owner.get(`/devices/proposals/${proposed.proposalId}`);
  t.equal(page.status, 200);
  const html = await page.text();
  t.match(html, /<h1>Proposed change: <code>edit_file<\/code> on <code>src\/math.js<\/code><\/h1>/);
  t.match(html, /<dt>Device<\/dt>\s*<dd>laptop<\/dd>/);
  t.match(html, /<dt>Proposed by<\/dt>\s*<dd>API token “ci-bot”<\/dd>/);
  t.match(html, /<dt>Proposed<\/dt>\s*<dd>\d+ \w+ \d{4}, \d\d:\d\d UTC<\/dd>/);
  t.match(html, /Waiting for you/);
  t.match(html, /<ins class="diff-line diff-added">\+const add = \(a, b\) =&gt; a \+ b;<\/ins>/);
  t.match(html, /action="\/devices\/proposals\/[0-9a-f-]+\/approve"/, "Approve and Reject while it waits");

  const list = await (await owner.get("/devices")).text();
  t.match(list, /Proposed by API token “ci-bot”/, "the list says who proposed it too");
  t.match(list, new RegExp(`<a href="/devices/proposals/${proposed.proposalId}">`));

  // The browser session proposing (the /devices form calls the same way).
  const byBrowser = await owner.post("/api/host/calls", {
    deviceId,
    tool: "edit_file",
    input: { path: "src/math.js", edits: [{ oldText: "a - b", newText: "a + b" }] },
  });
  t.equal(byBrowser.status, 202);
  const mine = (await readJson(await owner.get("/api/host/proposals"))).proposals.find((p: { id: string }) => p.id !== proposed.proposalId);
  t.match(mine, { proposer: { actor: "session", credential: null, name: null } });
  t.match(await (await owner.get(`/devices/proposals/${mine.id}`)).text(), /<dt>Proposed by<\/dt>\s*<dd>you, in your browser<\/dd>/);
});

t.test("another user's proposal is 404, to see and to decide", async (t) => {
  const { propose } = await setUp(t);
  const { proposalId } = await propose();
  const stranger = await signedIn(server.url);
  const page = await stranger.get(`/devices/proposals/${proposalId}`);
  t.equal(page.status, 404);
  t.match(await page.text(), /You have no proposal with this id/);
  t.equal((await stranger.request("POST", `/devices/proposals/${proposalId}/approve`, { form: {} })).status, 404);
  t.equal((await stranger.request("POST", `/devices/proposals/${proposalId}/reject`, { form: {}, headers: { "hx-request": "true" } })).status, 404);
  t.equal((await stranger.get("/devices/proposals/not-an-id")).status, 404);
});

t.test("deciding says what happened; decided proposals stay listed with outcome, who decided and when", async (t) => {
  const { owner, propose } = await setUp(t);
  const first = await propose();
  const second = await propose();

  // Without JavaScript: the proposal's page, saying what was applied.
  const approved = await owner.request("POST", `/devices/proposals/${first.proposalId}/approve`, { form: {} });
  t.equal(approved.status, 303);
  t.equal(approved.headers.get("location"), `/devices/proposals/${first.proposalId}?notice=applied`);
  const page = await (await owner.get(approved.headers.get("location")!)).text();
  t.match(page, /role="status">Applied: 1 replacement in src\/math.js \(\+1 −1 lines\), on “laptop”\.<\/div>/);
  t.match(page, /<dt>Approved by<\/dt>\s*<dd>you, in your browser, \d+ \w+ \d{4}, \d\d:\d\d UTC<\/dd>/);
  t.notMatch(page, /\/approve"/, "no buttons once decided");

  // With htmx: the sentence, with a link to the page, and the list told to refresh.
  const rejected = await owner.request("POST", `/devices/proposals/${second.proposalId}/reject`, { form: {}, headers: { "hx-request": "true" } });
  t.equal(rejected.status, 200);
  t.equal(rejected.headers.get("hx-trigger"), "proposals-changed");
  t.match(
    await rejected.text(),
    new RegExp(
      `Rejected: 1 replacement in src/math.js \\(\\+1 −1 lines\\)\\. Nothing on “laptop” changed\\. <a href="/devices/proposals/${second.proposalId}">See the proposal</a>`,
    ),
  );

  const panel = await (await owner.get("/devices/panel/proposals", { "hx-request": "true" })).text();
  t.match(panel, /No changes are waiting/);
  t.match(panel, /Recent decisions/);
  const rows = [...panel.matchAll(/<tr id="decided-([0-9a-f-]+)">([^]*?)<\/tr>/g)].map((match) => [match[1], match[2]!.replace(/\s+/g, " ")]);
  t.same(
    rows.map(([id]) => id),
    [second.proposalId, first.proposalId],
    "newest first",
  );
  t.match(
    rows[0]![1],
    /Rejected<\/span> Rejected: 1 replacement in src\/math.js\. Nothing on “laptop” changed\..*API token “ci-bot”.*you, in your browser, \d+/,
  );
  t.match(rows[1]![1], /Applied<\/span> Applied: 1 replacement/);

  const api = await readJson(await owner.get(`/api/host/proposals/${first.proposalId}`));
  t.match(api, { status: "applied", decidedBy: "session", url: `${server.url}/devices/proposals/${first.proposalId}` });
});
