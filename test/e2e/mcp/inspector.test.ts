import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import t from "tap";
import { builtExecutable } from "../../host/executable.js";
import { mcpWorld } from "../../mcp/helpers.js";

/**
 * A second MCP client nobody here wrote: the MCP Inspector's CLI mode, run as its own process against
 * the real server and the real device executable.
 */
const executable = await builtExecutable(t);
const world = await mcpWorld(t, executable, "inspected-box");
const inspector = path.join(
  path.dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/inspector/package.json")),
  "clients/launcher/build/index.js",
);

function runInspector(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [inspector, "--cli", `${world.url}/mcp`, "--transport", "http", "--header", `Authorization: Bearer ${world.token}`, ...args],
      {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, HOME: world.root, MCP_CATALOG_PATH: path.join(world.root, "..", "inspector-catalog.json") },
      },
    );
    t.teardown(() => {
      if (child.exitCode === null) child.kill("SIGKILL");
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

t.test("the Inspector lists the tools", async (t) => {
  const { code, stdout, stderr } = await runInspector(["--method", "tools/list"]);
  t.equal(code, 0, stderr);
  const { tools } = JSON.parse(stdout) as { tools: { name: string; annotations?: Record<string, unknown> }[] };
  t.ok(tools.some((tool) => tool.name === "list_devices"));
  t.match(
    tools.find((tool) => tool.name === "stat"),
    { annotations: { readOnlyHint: true } },
  );
});

t.test("the Inspector calls stat on the device", async (t) => {
  const { code, stdout, stderr } = await runInspector([
    "--method",
    "tools/call",
    "--tool-name",
    "stat",
    "--tool-arg",
    "device=inspected-box",
    "path=README.md",
  ]);
  t.equal(code, 0, stderr);
  const result = JSON.parse(stdout) as { isError?: boolean; content: { text: string }[] };
  t.notOk(result.isError);
  t.match(result.content[0]!.text, /"type": "file"/);
  t.match(result.content[0]!.text, /<untrusted-data nonce=/);
});
