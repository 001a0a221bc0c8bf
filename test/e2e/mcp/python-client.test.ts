import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import t from "tap";
import { IN_CI } from "../../helpers/database.js";
import { mintToken } from "../../helpers/auth.js";
import { builtExecutable } from "../../host/executable.js";
import { mcpWorld } from "../../mcp/helpers.js";

/**
 * The official Python MCP SDK (`mcp` 2.x) as a client, at 2026-07-28 (its default: it probes
 * server/discover) and at 2025-11-25 (`mode="legacy"`, the initialize handshake): list tools, a read
 * tool, a mutate tool that proposes; a host:read token sees and calls no tool that changes anything.
 * Against the real server and the real device executable. The SDK lives in a virtual environment made once (`MCP_PYTHON_VENV`, default
 * node_modules/.cache/mcp-python): pip is slow here, so it is cached, not made per run.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const VENV = process.env.MCP_PYTHON_VENV ?? path.join(ROOT, "node_modules/.cache/mcp-python");
const python = path.join(VENV, "bin/python");
const script = path.join(path.dirname(fileURLToPath(import.meta.url)), "python-client.py");
const run = promisify(execFile);

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
