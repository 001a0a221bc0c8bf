/**
 * Mallory's device in the noisy-neighbour run (bench/noisy.ts): a minimal device speaking the wire
 * protocol (`src/protocol`) by hand, in a process of its own, that answers every plan with the largest
 * plan the protocol lets through: a diff just under `MAX_PLAN_DIFF_BYTES` and `MAX_PLAN_DIFF_LINES`,
 * and a summary of `MAX_PLAN_SUMMARY_LENGTH` characters. Read calls get a small answer.
 *
 * `node --import tsx bench/noisy-device.ts <server url> <pairing code>` enrolls, announces its tools,
 * opens its stream, prints `connected <device id>` and serves until it is killed; then it prints how
 * many calls it answered (`served <plans> <runs>`).
 */
import { readEventStream } from "../src/device/sse.js";
import { MAX_PLAN_DIFF_BYTES, MAX_PLAN_DIFF_LINES, MAX_PLAN_SUMMARY_LENGTH } from "../src/protocol/plan.js";
import { PROTOCOL_HEADER, PROTOCOL_VERSION, StreamEvent, type AnnouncedTool, type CallEvent } from "../src/protocol/index.js";

const [url, code] = process.argv.slice(2) as [string, string];
const protocol = { [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) };

const NOISY_TOOLS: AnnouncedTool[] = [
  {
    name: "stat",
    description: "Size, type, timestamps",
    inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    class: "read",
  },
  {
    name: "write_file",
    description: "Create or overwrite a file",
    inputSchema: { type: "object", properties: { path: { type: "string" }, content: { type: "string" } }, required: ["path", "content"] },
    class: "mutate",
  },
];

/** The largest diff the protocol stores: as many lines as fit under both limits. */
function largestDiff(): string {
  const header = "--- a/f\n+++ b/f\n";
  const lines = MAX_PLAN_DIFF_LINES - 3;
  const width = Math.floor((MAX_PLAN_DIFF_BYTES - header.length - 64) / lines) - 2;
  return `${header}@@ -0,0 +1,${lines} @@\n` + `+${"x".repeat(width)}\n`.repeat(lines);
}

async function main(): Promise<void> {
  const enrolled = await fetch(`${url}/api/host/enroll`, {
    method: "POST",
    headers: { "content-type": "application/json", ...protocol },
    body: JSON.stringify({ code, name: "mallory-device", platform: "bench" }),
  });
  if (enrolled.status !== 201) throw new Error(`enroll: ${enrolled.status} ${await enrolled.text()}`);
  const { deviceId, token } = (await enrolled.json()) as { deviceId: string; token: string };
  const headers = { authorization: `Bearer ${token}`, ...protocol };
  const hello = await fetch(`${url}/api/host/hello`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ tools: NOISY_TOOLS, roots: ["/srv/mallory"], agent: "noisy-bench/1" }),
  });
  if (hello.status !== 200) throw new Error(`hello: ${hello.status} ${await hello.text()}`);

  // One body, serialised once: the device's own cost is not what is measured.
  const planBody = JSON.stringify({ ok: true, result: { diff: largestDiff(), summary: "s".repeat(MAX_PLAN_SUMMARY_LENGTH), path: "f" } });
  const runBody = JSON.stringify({ ok: true, result: { type: "file", size: 1 } });
  let plans = 0;
  let runs = 0;
  process.on("SIGTERM", () => {
    process.stdout.write(`served ${plans} ${runs}\n`);
    process.exit(0);
  });

  const stream = await fetch(`${url}/api/host/stream`, { headers });
  if (stream.status !== 200) throw new Error(`stream: ${stream.status} ${await stream.text()}`);
  for await (const message of readEventStream(stream.body!)) {
    if (message.event === StreamEvent.ready) process.stdout.write(`connected ${deviceId}\n`);
    if (message.event !== StreamEvent.call) continue;
    const call = JSON.parse(message.data) as CallEvent;
    const plan = call.mode === "plan";
    if (plan) plans++;
    else runs++;
    void fetch(`${url}/api/host/result/${encodeURIComponent(call.id)}`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: plan ? planBody : runBody,
    }).then(
      (response) => response.arrayBuffer(),
      () => {},
    );
  }
  throw new Error("the stream ended");
}

await main();
