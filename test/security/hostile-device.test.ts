/**
 * A hostile device, scripted over HTTP with the device protocol (not the real executable): huge diffs,
 * many lines, NUL bytes. What is stored and what a page renders stay bounded, a proposal over the
 * shown limit can still be reviewed (download) and decided, and the server's memory and /healthz
 * latency stay within generous bounds while it happens.
 */
import { readFile } from "node:fs/promises";
import t from "tap";
import { MAX_SHOWN_DIFF_LINES, MAX_STORED_DIFF_LINES } from "../../src/plugins/host/diff-limits.js";
import { RESULT_BODY_LIMITS } from "../../src/plugins/host/result-body.js";
import { startServerProcess } from "../helpers/services.js";
import { cookieOf, newUser } from "../helpers/auth.js";
import { pair, ScriptedDevice, statTool, writeTool } from "../host/helpers.js";
import { readJson } from "../helpers/client.js";

/** Generous: the attack in the issue took a 768 MB heap to exhaustion and /healthz to 9 s. */
const RSS_GROWTH_BOUND_MB = 400;
const HEALTHZ_BOUND_MS = 3_000;

// The server as `npm start` runs it, in a process of its own, so its memory is measured alone.
const server = await startServerProcess(t, {});
const url = server.url;

/** The server process's resident memory (Linux /proc), in MB. (Its start-up peak, VmHWM, says nothing here.) */
async function serverRss(): Promise<number> {
  const status = await readFile(`/proc/${server.pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)![1]) / 1024;
}

/** Samples the server's RSS every 50 ms while `work` runs; the highest sample above the one before it. */
async function rssGrowthDuring(work: () => Promise<void>): Promise<number> {
  const before = await serverRss();
  let highest = before;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      highest = Math.max(highest, await serverRss());
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  try {
    await work();
  } finally {
    sampling = false;
    await sampler;
  }
  return highest - before;
}
const owner = await newUser(url, "hostile-owner");
const cookie = cookieOf(owner.client);
const { deviceId, token } = await pair(owner.client, "hostile");
const device = new ScriptedDevice(url, deviceId, token);

t.test("the hostile device connects", async (t) => {
  t.equal((await device.hello([statTool, writeTool])).status, 200);
  await device.connect();
  t.comment(`before the attack: RSS ${(await serverRss()).toFixed(0)} MB`);
});

/** A diff of `lines` added lines, each `width` characters. */
function diffOf(lines: number, width = 1): string {
  return `--- a/f\n+++ b/f\n@@ -0,0 +1,${lines} @@\n` + `+${"x".repeat(width)}\n`.repeat(lines);
}

/** Asks for a write_file plan; the device answers with `diff`. Returns the caller's response. */
async function propose(diff: string): Promise<Response> {
  const call = owner.client.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "f", content: "x" }, timeoutMs: 60_000 });
  const planned = await device.nextCall();
  const posted = await device.postResult({ id: planned.id, ok: true, result: { diff, summary: "hostile" } });
  await posted.arrayBuffer();
  return call;
}

/** How long /healthz takes to answer 200 (it must answer 200). */
async function healthzMs(): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${url}/healthz`);
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`/healthz answered ${response.status}`);
  return performance.now() - started;
}

// 1.5 million lines (6 MB of JSON): as large as a result body may be (8 MB per mutate result, checked before the body
// is read); a larger body is refused at the result route with 413 RESULT_TOO_LARGE before any parsing.
t.test("a 1.5-million-line diff is refused, not stored, and costs bounded memory", async (t) => {
  let slowest = 0;
  const grown = await rssGrowthDuring(async () => {
    for (let round = 0; round < 3; round++) {
      const [answer, latency] = await Promise.all([propose(diffOf(1_500_000)), new Promise((r) => setTimeout(r, 50)).then(healthzMs)]);
      slowest = Math.max(slowest, latency);
      t.equal(answer.status, 422);
      t.match(await readJson(answer), { code: "DIFF_TOO_LARGE", message: /1500003 lines/ });
    }
  });
  const proposals = await readJson(await owner.client.get("/api/host/proposals"));
  t.equal(proposals.proposals.length, 0, "nothing was stored");
  t.ok(grown < RSS_GROWTH_BOUND_MB, `the server's RSS rose at most ${grown.toFixed(0)} MB (bound ${RSS_GROWTH_BOUND_MB})`);
  t.ok(server.alive(), "the server is still running");
  t.ok(slowest < HEALTHZ_BOUND_MS, `/healthz took at most ${slowest.toFixed(0)} ms during the attack (bound ${HEALTHZ_BOUND_MS})`);
});

t.test("a diff over the shown limit: the page shows its start, says so, offers the whole; it can be decided", async (t) => {
  const lines = MAX_STORED_DIFF_LINES - 100;
  const diff = diffOf(lines, 20);
  const answer = await propose(diff);
  t.equal(answer.status, 202, "stored: under the storage limit");
  const { proposalId } = await readJson(answer);

  let largest = 0;
  const grown = await rssGrowthDuring(async () => {
    for (let view = 0; view < 10; view++) {
      const page = await fetch(`${url}/devices`, { headers: { cookie, accept: "text/html" } });
      const html = await page.text();
      largest = Math.max(largest, html.length);
      if (view === 0) {
        t.equal(page.status, 200);
        t.match(html, `Diff too large: ${(lines + 3).toLocaleString("en")} lines`, "the headers and every added line");
        t.match(html, `only the first ${MAX_SHOWN_DIFF_LINES.toLocaleString("en")} are shown`);
        t.match(html, `href="/devices/proposals/${proposalId}/diff"`);
        t.match(html, "Only part of its", "the approve confirmation says so too");
      }
    }
  });
  t.ok(largest < 400_000, `the page is at most ${largest} bytes`);
  t.ok(grown < RSS_GROWTH_BOUND_MB, `ten views raised the server's RSS at most ${grown.toFixed(0)} MB (bound ${RSS_GROWTH_BOUND_MB})`);

  const download = await fetch(`${url}/devices/proposals/${proposalId}/diff`, { headers: { cookie } });
  t.equal(download.status, 200);
  t.match(download.headers.get("content-disposition"), /attachment/);
  t.equal(await download.text(), diff, "the download is the whole stored diff");
  const stranger = await newUser(url, "hostile-stranger");
  t.equal((await fetch(`${url}/devices/proposals/${proposalId}/diff`, { headers: { cookie: cookieOf(stranger.client) } })).status, 404, "only for its owner");

  // Approving, knowingly: the device is asked to apply exactly the stored diff.
  const decided = owner.client.request("POST", `/devices/proposals/${proposalId}/approve`, { form: {}, headers: { accept: "text/html" } });
  const apply = await device.nextCall();
  t.equal(apply.mode, "apply");
  await device.postResult({ id: apply.id, ok: true, result: { applied: true } });
  t.equal((await decided).status, 303);
  t.match(await readJson(await owner.client.get(`/api/host/proposals/${proposalId}`)), { status: "applied" });
});

/** Posts `outcome` (the body, as text) for one call on the result route, as the device does (`/api/host/result/<call id>`). */
function postOutcome(callId: string, body: string): Promise<Response> {
  return fetch(`${url}/api/host/result/${callId}`, { method: "POST", headers: device.headers({ "content-type": "application/json" }), body });
}

// A result refused at the edge ends its call at once: the caller is told why (502 DEVICE_RESULT_INVALID),
// not kept waiting until the call's timeout (60 s here, which would answer DEVICE_TIMEOUT).
for (const [route, post] of [["/api/host/result/<call id>", postOutcome]] as const) {
  t.test(`NUL bytes in a diff posted to ${route} are refused at the edge, and the caller hears of it at once`, async (t) => {
    const answer = owner.client.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "f", content: "x" }, timeoutMs: 60_000 });
    const planned = await device.nextCall();
    const posted = await post(planned.id, JSON.stringify({ ok: true, result: { diff: "+a\u0000b\n", summary: "nul" } }));
    t.equal(posted.status, 400);
    t.match(await readJson(posted), { code: "INVALID_CHARACTERS" });
    const caller = await answer;
    t.equal(caller.status, 502);
    t.match(await readJson(caller), { code: "DEVICE_RESULT_INVALID", message: /INVALID_CHARACTERS/ });
    t.equal(
      (await post(planned.id, JSON.stringify({ ok: true, result: { diff: "+a\n", summary: "late" } }))).status,
      409,
      "a late, valid result for the ended call is refused",
    );
    t.ok((await healthzMs()) < HEALTHZ_BOUND_MS);
  });
}

t.test("a result over the route's 8 MB bound is refused unread (413), and the caller hears of it at once", async (t) => {
  const answer = owner.client.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "f" }, timeoutMs: 60_000 });
  const called = await device.nextCall();
  const huge = JSON.stringify({ ok: true, result: { type: "file", padding: "x".repeat(RESULT_BODY_LIMITS.read) } });
  const posted = await postOutcome(called.id, huge);
  t.equal(posted.status, 413);
  t.match(await readJson(posted), { code: "RESULT_TOO_LARGE" });
  const caller = await answer;
  t.equal(caller.status, 502);
  t.match(await readJson(caller), { code: "DEVICE_RESULT_INVALID", message: /RESULT_TOO_LARGE/ });
});

t.test("the device hangs up", async (t) => {
  device.disconnect();
  t.ok((await healthzMs()) < HEALTHZ_BOUND_MS);
});
