import { rmSync } from "node:fs";
import { isSea } from "node:sea";
import { createScope, invokeTool, ToolError, type LocalTool, type ToolMode } from "../tools/index.js";
import { runUpdate, showConfig, showStatus, versionText } from "./cli-admin.js";
import { runService } from "./cli-service.js";
import { declaredTools, HostConfigError, hostPlatform, networkEnvironment, resolveHostConfig, type ConfigSources, type HostEnvironment } from "./config.js";
import { ExitCode, runHost } from "./host.js";
import { deviceRequest, networkDispatcher } from "./http.js";
import { RotatingLog } from "./log-file.js";
import { updateExecutable } from "./update.js";
import { UPDATE_KEYS } from "./update-keys.js";
import { HOST_VERSION } from "./version.js";

export const USAGE = `tether-host ${HOST_VERSION}: runs local tools for a Tether server, over one outbound connection.

Usage:
  tether-host [run]                           connect to the server and run the calls it sends; the first
                                              time, it shows a code to approve on the server's /device page
  tether-host call <tool> '<json>' [--plan | --apply]
                                              run one tool locally, no server: prints the result as
                                              JSON on stdout (exit 0), or { code, message } (exit 1).
                                              A mutate tool plans only unless --apply is given.
  tether-host tools                           list the tools (name, class, description) as JSON
  tether-host status [--json]                 enrolled?, connected since when, version, roots, pending update
  tether-host config [--json]                 the effective configuration, and where each value came from
  tether-host update [--force]                install the server's newer release (signature, size and digest
                                              checked; never a downgrade), then restart the service if it runs
  tether-host service install [--files-only] | uninstall | status | logs [-n <lines>] [-f]
                                              run as a service of the user: systemd (Linux), launchd (macOS),
                                              a scheduled task at logon (Windows)
  tether-host --help | --version

Configuration: config.json in the configuration directory (\`tether-host config\` shows where), with the
keys server, roots, name, concurrency, proxy, noProxy, caFile, update ("auto", "notify" or "off") and
tools; each of these variables overrides its key:
  TETHER_SERVER_URL     server base address (default http://localhost:3000)
  TETHER_PAIRING_CODE   one-time pairing code from the server's /devices page, instead of approving
                        a code on /device (first start only; for scripted enrollment)
  TETHER_ROOTS          allowed roots, separated by "${process.platform === "win32" ? ";" : ":"}" (relative to the working
                        directory; default: the working directory)
  TETHER_CONFIG_DIR     the configuration directory, which also holds the device credential (default
                        $XDG_CONFIG_HOME/tether-host or ~/.config/tether-host on Linux)
  TETHER_DEVICE_NAME    the name shown on /devices (default: the host name)
  TETHER_CONCURRENCY    calls run at once (default 4)
  TETHER_AUTO_UPDATE    1: install newer releases the server announces; TETHER_UPDATE=auto|notify|off
  HTTPS_PROXY, HTTP_PROXY, NO_PROXY
                        proxy for every request to the server (the event stream included)
  TETHER_CA_FILE        extra trusted CA certificates, PEM (NODE_EXTRA_CA_CERTS works too)

Exit codes: 0 stopped (SIGINT/SIGTERM), 1 error, 2 usage or a bad setting, 3 not paired (request denied or
expired) or revoked (pair again), 4 another tether-host took over this device's credential, 10 updated
itself (its service manager starts the new executable).
`;

export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const defaultIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

/**
 * The `tether-host` command. A consumer building its own executable passes its tools next to the
 * built-ins: `process.exitCode = await runCli(process.argv.slice(2), [...builtinTools, convertIfc])`.
 * Logs go to stderr; only results go to stdout.
 */
export async function runCli(
  argv: readonly string[],
  tools: readonly LocalTool[],
  io: CliIo = defaultIo,
  env: Record<string, string | undefined> = process.env,
): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "--help" || command === "-h" || command === "help") {
    io.stdout(USAGE);
    return 0;
  }
  if (command === "--version" || command === "-v") {
    io.stdout(versionText());
    return 0;
  }
  const known = ["run", "call", "tools", "status", "config", "update", "service"];
  if (command !== undefined && !known.includes(command)) {
    io.stderr(`tether-host: unknown command or option "${command}"\n\n${USAGE}`);
    return ExitCode.config;
  }
  // Every command reads the configuration first: a bad value is one line and exit code 2, whatever the command.
  let resolved: { config: HostEnvironment; sources: ConfigSources };
  let allTools: LocalTool[];
  try {
    resolved = resolveHostConfig(env);
    allTools = [...tools, ...declaredTools(resolved.config, tools)];
  } catch (error) {
    if (!(error instanceof HostConfigError)) throw error;
    io.stderr(`tether-host: ${error.message}\n`);
    return ExitCode.config;
  }
  const { config, sources } = resolved;
  const admin = { ...io, env };
  const flag = (name: string) => rest.includes(name);
  const onlyFlags = (...allowed: string[]) => rest.every((arg) => allowed.includes(arg));
  switch (command) {
    case "call":
      return callLocally(rest, allTools, config, io);
    case "tools": {
      const listing = allTools.map((tool) => ({ name: tool.name, class: tool.class, description: tool.description }));
      io.stdout(`${JSON.stringify(listing, null, 2)}\n`);
      return 0;
    }
    case "status":
      return onlyFlags("--json") ? showStatus(config, admin, flag("--json")) : usage(io, "tether-host status [--json]");
    case "config":
      return onlyFlags("--json") ? showConfig(config, sources, admin, flag("--json")) : usage(io, "tether-host config [--json]");
    case "update":
      return onlyFlags("--force") ? runUpdate(config, sources, admin, flag("--force")) : usage(io, "tether-host update [--force]");
    case "service":
      return runService(rest, config, admin);
    default:
      return rest.length === 0 ? runAsHost(allTools, config, io, env) : usage(io, "tether-host [run]");
  }
}

function usage(io: CliIo, line: string): number {
  io.stderr(`tether-host: usage: ${line}\n`);
  return ExitCode.config;
}

/** `tether-host` / `tether-host run`: the connected host, with the configured update policy. */
async function runAsHost(tools: LocalTool[], config: HostEnvironment, io: CliIo, env: Record<string, string | undefined>): Promise<number> {
  // Under launchd or a supervisor without a log of its own, the host keeps a rotated file (TETHER_LOG_FILE).
  const file = env.TETHER_LOG_FILE?.trim() ? new RotatingLog(env.TETHER_LOG_FILE.trim()) : undefined;
  const log = (line: string) => (file ? file.write(line) : io.stderr(`${line}\n`));
  const service = env.TETHER_SERVICE?.trim() || undefined;
  // Windows moves a replaced executable aside (update.ts); the next start removes it.
  if (process.platform === "win32" && isSea()) rmSync(`${process.execPath}.old`, { force: true });
  const install = isSea()
    ? () =>
        updateExecutable({
          server: config.server,
          request: deviceRequest(networkDispatcher(networkEnvironment(config, env))),
          executable: process.execPath,
          version: HOST_VERSION,
          platform: hostPlatform(),
          trustedKeys: UPDATE_KEYS,
          log,
        })
    : undefined;
  const code = await runHost({ tools, log, updates: { policy: config.update, restartAfterUpdate: service !== undefined, ...(install ? { install } : {}) } });
  // launchd restarts every unsuccessful exit; where a restart cannot help, the host ends "successfully".
  if (service === "launchd" && [ExitCode.config, ExitCode.pairAgain, ExitCode.replaced].includes(code as 2 | 3 | 4)) {
    log(`tether-host: exit ${code} reported as 0 so that launchd does not start it again`);
    return 0;
  }
  return code;
}

/** `call <tool> '<json>' [--plan | --apply]`: one tool, the same roots, no server. */
async function callLocally(args: readonly string[], tools: readonly LocalTool[], config: HostEnvironment, io: CliIo): Promise<number> {
  const flags = args.filter((arg) => arg.startsWith("--"));
  const positional = args.filter((arg) => !arg.startsWith("--"));
  const unknown = flags.filter((flag) => flag !== "--plan" && flag !== "--apply");
  if (positional.length < 1 || positional.length > 2 || unknown.length > 0 || (flags.includes("--plan") && flags.includes("--apply"))) {
    io.stderr(`tether-host: usage: tether-host call <tool> '<json>' [--plan | --apply]\n`);
    return 2;
  }
  const fail = (code: string, message: string) => {
    io.stdout(`${JSON.stringify({ code, message })}\n`);
    return ExitCode.failed;
  };
  const [name, rawInput = "{}"] = positional as [string, string | undefined];
  let input: unknown;
  try {
    input = JSON.parse(rawInput);
  } catch (error) {
    return fail("INVALID_INPUT", `The input is not valid JSON: ${(error as Error).message}`);
  }
  const tool = tools.find((candidate) => candidate.name === name);
  let mode: ToolMode | undefined;
  if (flags.includes("--apply")) mode = "apply";
  else if (flags.includes("--plan")) mode = "plan";
  else if (tool?.class === "mutate") mode = "plan";
  try {
    const scope = await createScope(config.roots);
    const result = await invokeTool(tools, name, input, { scope, ...(mode ? { mode } : {}) });
    io.stdout(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (error instanceof ToolError) return fail(error.code, error.message);
    return fail("INTERNAL", error instanceof Error ? error.message : String(error));
  }
}
