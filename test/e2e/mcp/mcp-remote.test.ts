import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import t from "tap";
import { chromiumAvailable, launchChromium, pageSignedIn } from "../browser/support.js";
import { IN_CI } from "../../helpers/database.js";
import { builtExecutable } from "../../host/executable.js";
import { mcpWorld, textOf } from "../../mcp/helpers.js";

/**
 * `mcp-remote` (0.15.1), the stdio bridge clients such as Claude Desktop use for remote servers: it
 * meets /mcp's 401, registers itself, prints the authorization URL; the owner, signed in, allows it in
 * Chromium; then an MCP client speaking stdio to mcp-remote lists and calls tools on the real device.
 * mcp-remote is installed once into a cache folder (`MCP_REMOTE_DIR`, default node_modules/.cache/mcp-remote).
 */
const PACKAGE = "mcp-remote@0.15.1";
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const CACHE = process.env.MCP_REMOTE_DIR ?? path.join(ROOT, "node_modules/.cache/mcp-remote");
const proxy = path.join(CACHE, "node_modules/mcp-remote/dist/proxy.js");
if (!chromiumAvailable(t)) process.exit(0);
if (!existsSync(proxy)) {
  await mkdir(CACHE, { recursive: true });
  const installed = await promisify(execFile)("npm", ["install", "--prefix", CACHE, "--no-audit", "--no-fund", "--no-save", PACKAGE], {
    timeout: 300_000,
  }).then(
    () => true,
    (error: Error) => error.message,
  );
  if (installed !== true) {
    if (IN_CI) throw new Error(`could not install ${PACKAGE}: ${String(installed)}`);
    t.plan(0, `skip: could not install ${PACKAGE} (offline?)`);
    process.exit(0);
  }
}

const executable = await builtExecutable(t);
const world = await mcpWorld(t, executable, "remote-box");
const config = await mkdtemp(path.join(os.tmpdir(), "tether-mcp-remote-"));
t.teardown(() => rm(config, { recursive: true, force: true }));

t.test("mcp-remote: OAuth in Chromium, then tools over stdio", async (t) => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [proxy, `${world.url}/mcp`, "--allow-http"],
    // No browser of its own: it prints the URL, which the test opens in Chromium as the owner would.
    env: { PATH: "/usr/bin:/bin", HOME: config, MCP_REMOTE_CONFIG_DIR: config, BROWSER: "true" },
    stderr: "pipe",
  });
  let log = "";
  const authorizationURL = new Promise<string>((resolve) => {
    transport.stderr!.on("data", (chunk: Buffer) => {
      log += chunk.toString();
      const match = /Please authorize this client by visiting:\s+(\S+)/.exec(log);
      if (match) resolve(match[1]!);
    });
  });
  const client = new Client({ name: "stdio-agent", version: "1" });
  t.teardown(() => client.close());
  const connected = client.connect(transport);

  const page = await pageSignedIn(await launchChromium(t), world.url, world.owner.cookies);
  await page.goto(await authorizationURL);
  t.match(new URL(page.url()).pathname, "/oauth/consent", `on the consent page (mcp-remote said: ${log.slice(-300)})`);
  await page.click("button[value=allow]");
  await page.waitForURL((url) => url.hostname === "localhost" || url.hostname === "127.0.0.1");

  await connected;
  const { tools } = await client.listTools();
  t.ok(
    tools.some((tool) => tool.name === "read_file"),
    "the tools, through mcp-remote",
  );
  const read = await client.callTool({ name: "read_file", arguments: { device: "remote-box", path: "notes.txt" } });
  t.match(textOf(read), /first line/);
  const grants = await (await world.owner.get("/settings/mcp")).text();
  t.match(grants, /mcp-remote|MCP CLI/i, "the settings page lists the client mcp-remote registered as");
});
