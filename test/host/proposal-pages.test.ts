/**
 * Reading many proposals (issue 24): `GET /api/host/proposals` is paged and carries no diffs (a diff is
 * read one proposal at a time), and `/devices` stays bounded in size however many large proposals wait
 * and whatever their devices put in them.
 */
import t from "tap";
import { MAX_SHOWN_DIFF_LINES } from "../../src/plugins/host/diff-limits.js";
import { MAX_PLAN_DIFF_BYTES, MAX_PLAN_SUMMARY_LENGTH } from "../../src/protocol/index.js";
import { PROPOSALS_PER_PAGE } from "../../src/web/routes/devices-dashboard.js";
import { readJson } from "../helpers/client.js";
import { connectedDevice, pair, ScriptedDevice, signedIn, startHostServer } from "./helpers.js";

const server = await startHostServer(t, { env: { MAX_PENDING_PROPOSALS_PER_DEVICE: "40", MAX_PENDING_PROPOSALS_PER_USER: "40" } });

/** A diff just under the stored limit of `lines` lines, each a row of the character HTML escapes the most. */
function largeDiff(lines: number): string {
  const head = `--- a/f\n+++ b/f\n@@ -0,0 +1,${lines} @@\n`;
  const width = Math.floor((MAX_PLAN_DIFF_BYTES - head.length) / lines) - 2;
  return head + `+${"'".repeat(width)}\n`.repeat(lines);
}

t.test("the list is paged (cursor and limit), without diffs; one proposal has its diff", async (t) => {
  const { owner, deviceId, device } = await connectedDevice(t, server.url);
  device.serve((call) => ({
    diff: `--- a/${call.input.path}\n+++ b/${call.input.path}\n@@ -0,0 +1 @@\n+${call.input.content}\n`,
    summary: `write ${call.input.path}`,
  }));
  const ids: string[] = [];
  for (let i = 0; i < 25; i++) {
    const response = await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: `f${i}`, content: "x".repeat(1000) } });
    t.equal(response.status, 202);
    ids.push((await readJson(response)).proposalId);
  }

  const seen: string[] = [];
  let cursor: string | null = null;
  const sizes: number[] = [];
  do {
    const response = await owner.get(`/api/host/proposals?limit=10${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    t.equal(response.status, 200);
    const text = await response.text();
    t.notMatch(text, /xxxxxxxxxx/, "no diff or input in the list");
    const page = JSON.parse(text);
    t.equal(page.total, 25, "the total counts every page");
    for (const proposal of page.proposals) {
      t.notOk("diff" in proposal || "input" in proposal || "result" in proposal);
      t.match(proposal, { status: "pending", summary: /^write f\d+$/, diffLines: 4, purgedAt: null });
    }
    sizes.push(page.proposals.length);
    seen.push(...page.proposals.map((proposal: { id: string }) => proposal.id));
    cursor = page.nextCursor;
  } while (cursor);
  t.same(sizes, [10, 10, 5]);
  t.same(seen, ids, "every proposal once, oldest first");

  t.equal((await readJson(await owner.get("/api/host/proposals"))).proposals.length, 20, "20 by default");
  t.equal((await readJson(await owner.get("/api/host/proposals?limit=0"))).proposals.length, 1, "at least one");
  const one = await readJson(await owner.get(`/api/host/proposals/${ids[3]}`));
  t.match(one, { id: ids[3], diff: /^--- a\/f3\n/, input: { path: "f3", content: "x".repeat(1000) }, status: "pending" });

  for (const [query, code] of [
    ["cursor=not-a-proposal", "INVALID_CURSOR"],
    ["limit=ten", "INVALID_INPUT"],
    ["limit=1000", "INVALID_INPUT"],
    ["page=2", "INVALID_INPUT"],
  ] as const) {
    const response = await owner.get(`/api/host/proposals?${query}`);
    t.equal(response.status, 400, query);
    t.equal((await readJson(response)).code, code, query);
  }
  const stranger = await signedIn(server.url);
  const foreign = await stranger.get(`/api/host/proposals?cursor=${ids[0]}`);
  t.equal(foreign.status, 400, "another user's proposal is no cursor");
  t.equal((await readJson(foreign)).code, "INVALID_CURSOR");
  t.same(await readJson(await stranger.get("/api/host/proposals")), { proposals: [], nextCursor: null, total: 0 });
});

t.test("/devices stays bounded with many large proposals, and pages through them", async (t) => {
  const { owner, deviceId, device } = await connectedDevice(t, server.url, "big-planner");
  const COUNT = 25;
  const diff = largeDiff(5_000);
  let plan: Record<string, unknown> = { diff, summary: "'".repeat(MAX_PLAN_SUMMARY_LENGTH) };
  device.serve(() => plan);
  for (let i = 0; i < COUNT; i++) {
    t.equal((await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: `f${i}`, content: "x" } })).status, 202);
  }

  // One diff's render limits for the whole page, summaries of at most 10,000 characters (each escaped
  // into 5 bytes), ten proposals: a page under 1.5 MB, where each diff alone would have been 0.5 MB.
  const BOUND = 1_500_000;
  const page = await owner.get("/devices", { accept: "text/html" });
  t.equal(page.status, 200);
  const html = await page.text();
  t.ok(Buffer.byteLength(html) < BOUND, `the page is ${Buffer.byteLength(html)} bytes (bound ${BOUND})`);
  t.equal(html.match(/<article class="proposal"/g)?.length, PROPOSALS_PER_PAGE, "one page of proposals");
  // (Pages are checked with includes: a failed match would print a megabyte.)
  t.ok(html.includes(`${COUNT} changes are waiting; this page shows ${PROPOSALS_PER_PAGE} of them`), "the page says how many wait");
  const shownLines = html.match(/<ins class="diff-line diff-added">/g)?.length ?? 0;
  t.ok(shownLines <= MAX_SHOWN_DIFF_LINES, `${shownLines} diff lines on the page, within one diff's limit`);
  t.equal(html.split("Diff too large: 5,003 lines").length - 1, PROPOSALS_PER_PAGE, "each diff says it was cut");
  t.equal(html.match(/href="\/devices\/proposals\/[0-9a-f-]+\/diff" download/g)?.length, PROPOSALS_PER_PAGE, "and offers the whole");

  // The next pages, as the link gives them, with and without htmx.
  const next = /href="\/devices\?proposals=([0-9a-f-]+)#proposals-panel"/.exec(html)?.[1];
  t.ok(next, "a link to the next page");
  const second = await (await owner.get(`/devices?proposals=${next}`, { accept: "text/html" })).text();
  t.ok(Buffer.byteLength(second) < BOUND);
  t.equal(second.match(/<article class="proposal"/g)?.length, PROPOSALS_PER_PAGE);
  const third = /hx-get="\/devices\/panel\/proposals\?cursor=([0-9a-f-]+)"/.exec(second)?.[1];
  const panel = await (await owner.get(`/devices/panel/proposals?cursor=${third}`, { "hx-request": "true" })).text();
  t.equal(panel.match(/<article class="proposal"/g)?.length, COUNT - 2 * PROPOSALS_PER_PAGE, "the last page");
  t.notOk(panel.includes('rel="next"'), "and no next link on it");
  t.equal((await owner.get("/devices/panel/proposals?cursor=nope", { "hx-request": "true" })).status, 400, "a bad cursor is a 400");

  // A small diff among them shows whole.
  plan = { diff: "--- a/s\n+++ b/s\n@@ -1 +1 @@\n-small\n+change\n", summary: "a small one" };
  await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "s", content: "x" } });
  const last = await (await owner.get(`/devices/panel/proposals?cursor=${third}`, { "hx-request": "true" })).text();
  t.ok(last.includes('<ins class="diff-line diff-added">+change</ins>'), "a small diff shows whole");
});

t.test("/devices stays bounded whatever a device announces: tool tooltips hold the start of a description", async (t) => {
  const owner = await signedIn(server.url);
  const { deviceId, token } = await pair(owner, "announcer");
  const device = new ScriptedDevice(server.url, deviceId, token);
  // As much as a hello may hold (a 1 MB body): 256 tools with 3,500-character descriptions and a few
  // long roots, all of the character HTML escapes the most (5 bytes each).
  const tools = Array.from({ length: 256 }, (_, i) => ({
    name: `tool_${i}`,
    description: "'".repeat(3500),
    inputSchema: { type: "object", properties: { path: { type: "string" } } },
    class: "read" as const,
  }));
  const roots = Array.from({ length: 8 }, (_, i) => `/${i}/${"'".repeat(4000)}`);
  t.equal((await device.hello(tools, roots)).status, 200);
  const BOUND = 1_000_000;
  const html = await (await owner.get("/devices", { accept: "text/html" })).text();
  t.ok(Buffer.byteLength(html) < BOUND, `the page is ${Buffer.byteLength(html)} bytes (bound ${BOUND})`);
  t.equal(html.match(/class="chip chip-read"/g)?.length, 256, "every tool is listed");
  const panel = await (await owner.get(`/devices/${deviceId}/tools/tool_7`, { "hx-request": "true" })).text();
  t.ok(panel.includes("&#39;".repeat(3500)), "the tool panel shows a tool's whole description");
});
