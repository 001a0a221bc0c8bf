import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import t, { type Test } from "tap";
import { IN_CI } from "../../helpers/database.js";
import { mintToken } from "../../helpers/auth.js";
import { readJson } from "../../helpers/client.js";
import { chromiumAvailable, launchChromium } from "../browser/support.js";
import { pair } from "../../host/helpers.js";
import { builtExecutable } from "../../host/executable.js";
import { mcpWorld } from "../../mcp/helpers.js";
import { ownerDecides } from "./owner-decides.js";

/**
 * The official Python MCP SDK (`mcp` 2.x) as a client, at 2026-07-28 (its default: it probes
 * server/discover) and at 2025-11-25 (`mode="legacy"`, the initialize handshake): list tools, a read
 * tool, a mutate tool that proposes; a host:read token sees and calls no tool that changes anything.
 * With an elicitation callback (the SDK then declares URL-mode elicitation) a mutate tool's approval
 * completes end to end: the owner approves or rejects in Chromium at the URL the client was given (an
 * input_required elicitation at 2026-07-28; the error -32042 at 2025-11-25, after which the client retries
 * the same call). A token limited to one device sees and reaches
 * no other. Against the real server and the real device executable. The SDK lives in a virtual environment made once (`MCP_PYTHON_VENV`, default
 * node_modules/.cache/mcp-python): pip is slow here, so it is cached, not made per run.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const VENV = process.env.MCP_PYTHON_VENV ?? path.join(ROOT, "node_modules/.cache/mcp-python");
const python = path.join(VENV, "bin/python");
const script = path.join(path.dirname(fileURLToPath(import.meta.url)), "python-client.py");
const run = promisify(execFile);

if (!chromiumAvailable(t)) process.exit(0);
if (
  !existsSync(python) ||
  (await run(python, ["-c", "import mcp.client.client"]).then(
    () => false,
    () => true,
  ))
) {
  const made = await run("python3", ["-m", "venv", VENV])
    .then(() => run(path.join(VENV, "bin/pip"), ["install", "--quiet", "mcp>=2.3,<3"], { timeout: 900_000 }))
    .then(
      () => true,
      (error: Error) => error.message,
    );
  if (made !== true) {
    if (IN_CI) throw new Error(`could not install the Python MCP SDK: ${made}`);
    t.plan(0, `skip: could not install the Python MCP SDK (${String(made).split("\n")[0]})`);
    process.exit(0);
  }
}

const executable = await builtExecutable(t);
const world = await mcpWorld(t, executable, "py-box");
const token = world.token;
const readOnly = await mintToken(world.owner, { name: "python read", scopes: ["host:read"] });
const browser = await launchChromium(t);
// A second device of the owner's (paired, left offline) and a token limited to the first one.
const other = (await pair(world.owner, "py-other")).deviceId;
const minted = await world.owner.post("/api/tokens", { name: "python one device", scopes: ["host:call"], grants: { devices: [world.device.id] } });
const limited = (await readJson(minted)).token as string;

interface Outcome {
  protocolVersion: string;
  tools: string[];
  stat: { isError: boolean | null; structured: { result: string } };
  write: { isError: boolean | null; structured: { status: string; proposalId: string } } | null;
}

async function pythonClient(bearer: string, mode: "auto" | "legacy"): Promise<Outcome> {
  const { stdout } = await run(python, [script, `${world.url}/mcp`, bearer, mode, world.device.id], { timeout: 60_000 });
  return JSON.parse(stdout.trim().split("\n").pop()!) as Outcome;
}

for (const [mode, revision] of [
  ["auto", "2026-07-28"],
  ["legacy", "2025-11-25"],
] as const) {
  t.test(`the Python SDK at ${revision}: tools, a read tool, a mutate tool that proposes`, async (t) => {
    const outcome = await pythonClient(token, mode);
    t.equal(outcome.protocolVersion, revision);
    t.ok(
      ["list_devices", "proposal_status", "read_file", "stat", "write_file"].every((name) => outcome.tools.includes(name)),
      outcome.tools.join(),
    );
    t.notOk(outcome.stat.isError);
    t.match(outcome.stat.structured.result, /"type": "file"/);
    t.match(
      outcome.write,
      { structured: { status: "pending", proposalId: String } },
      "proposed, not applied: a client without URL elicitation gets the proposal",
    );
  });

  t.test(`the Python SDK at ${revision} with a host:read token sees no tool that changes anything`, async (t) => {
    const outcome = await pythonClient(readOnly, mode);
    t.ok(outcome.tools.includes("stat") && outcome.tools.includes("read_file"));
    t.notOk(
      outcome.tools.some((name) => ["write_file", "edit_file", "delete", "proposal_status"].includes(name)),
      outcome.tools.join(),
    );
    t.equal(outcome.write, null);
    t.notOk(outcome.stat.isError);
  });
}

/**
 * Runs one scenario of python-client.py; each `{"url"}` line it prints is handed to `onURL` (the owner
 * decides in Chromium), then the script is told to go on. Resolves with its last line, the outcome.
 */
async function interactive(t: Test, bearer: string, mode: string, scenario: string, onURL: (url: string) => Promise<void> = async () => {}): Promise<any> {
  const child = spawn(python, [script, `${world.url}/mcp`, bearer, mode, world.device.id, scenario, other], { stdio: ["pipe", "pipe", "pipe"] });
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
  let last: unknown;
  for await (const line of createInterface({ input: child.stdout })) {
    if (!line.startsWith("{")) continue;
    const parsed = JSON.parse(line) as { url?: string };
    if (Object.keys(parsed).length === 1 && typeof parsed.url === "string") {
      await onURL(parsed.url);
      child.stdin.write("\n");
    } else last = parsed;
  }
  const code = await exited;
  if (code !== 0) throw new Error(`python-client.py ${scenario} exited ${code}: ${stderr}`);
  return last;
}

const notes = () => readFile(path.join(world.root, "notes.txt"), "utf8");

for (const [mode, revision] of [
  ["auto", "2026-07-28"],
  ["legacy", "2025-11-25"],
] as const) {
  t.test(`the Python SDK at ${revision}: the owner approves in Chromium at the URL the client shows; the change is applied`, async (t) => {
    const before = await notes();
    const shown: string[] = [];
    const outcome = await interactive(t, token, mode, "approve", async (url) => {
      shown.push(url);
      t.equal(await notes(), before, "nothing changed before the owner decided");
      t.match(await ownerDecides(browser, world, url, "Approve"), /notes\.txt/, "the proposal's page shows the change");
    });
    t.equal(outcome.protocolVersion, revision);
    t.equal(shown.length, 1, "one URL for the owner");
    t.match(shown[0], new RegExp(`^${world.url}/devices/proposals/`));
    // 2026-07-28: the URL came as an elicitation; 2025-11-25: as the error -32042, and the call was retried.
    t.same(outcome.elicited, revision === "2026-07-28" ? ["url"] : ["-32042"]);
    t.notOk(outcome.result.isError);
    t.match(outcome.result.structured, { status: "applied" });
    t.equal(await notes(), "approved through python\n", "the device's disk changed");
  });

  t.test(`the Python SDK at ${revision}: the owner rejects in Chromium; the client gets the refusal`, async (t) => {
    await writeFile(path.join(world.root, "notes.txt"), "first line\n");
    const outcome = await interactive(t, token, mode, "approve", async (url) => void (await ownerDecides(browser, world, url, "Reject")));
    t.match(outcome.result.structured, { status: "rejected" });
    t.equal(outcome.result.isError, true, "the retried call is a refusal");
    t.equal(await notes(), "first line\n", "nothing changed");
  });

  t.test(`the Python SDK at ${revision} with a token limited to one device sees and reaches no other`, async (t) => {
    const outcome = await interactive(t, limited, mode, "grants");
    t.equal(outcome.protocolVersion, revision);
    t.same(outcome.devices, [world.device.id], "list_devices shows the granted device only");
    t.ok(outcome.catalog.includes(world.device.id), "tools/list names the granted device");
    t.notOk(outcome.catalog.includes(other), "and never the other");
    t.match(outcome.refused, { isError: true, structured: { code: "DEVICE_NOT_FOUND" } }, "a call naming the other device is refused");
    t.notOk(outcome.mine.isError);
    const open = await interactive(t, token, mode, "grants");
    t.same([...open.devices].sort(), [world.device.id, other].sort(), "an unlimited token lists both");
    t.match(open.refused, { isError: true, structured: { code: "DEVICE_OFFLINE" } }, "and reaches the other (offline) device");
  });
}

t.test("the Python SDK at 2026-07-28: a made-up or altered requestState is refused before the tool runs", async (t) => {
  const before = await notes();
  const outcome = await interactive(t, token, "auto", "forged");
  t.equal(outcome.firstRound, "InputRequiredResult", "the first round asks for the owner's approval");
  t.equal(outcome.forged, -32602);
  t.equal(outcome.altered, -32602);
  t.same(outcome.elicited, [], "no retry was asked of the client");
  t.equal(await notes(), before, "nothing changed");
});
