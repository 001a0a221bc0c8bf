import { createScope, invokeTool, ToolError, type LocalTool, type ToolMode } from "../tools/index.js";
import { HostConfigError, hostEnvironment } from "./config.js";
import { ExitCode, runHost } from "./host.js";
import { HOST_VERSION } from "./version.js";

export const USAGE = `tether-host ${HOST_VERSION}: runs local tools for a Tether server, over one outbound connection.

Usage:
  tether-host                                 connect to the server and run the calls it sends; the first
                                              time, it shows a code to approve on the server's /device page
  tether-host call <tool> '<json>' [--plan | --apply]
                                              run one tool locally, no server: prints the result as
                                              JSON on stdout (exit 0), or { code, message } (exit 1).
                                              A mutate tool plans only unless --apply is given.
  tether-host tools                           list the tools (name, class, description) as JSON
  tether-host --help | --version

Environment:
  TETHER_SERVER_URL     server base address (default http://localhost:3000)
  TETHER_PAIRING_CODE   one-time pairing code from the server's /devices page, instead of approving
                        a code on /device (first start only; for scripted enrollment)
  TETHER_ROOTS          allowed roots, separated by "${process.platform === "win32" ? ";" : ":"}" (relative to the working
                        directory; default: the working directory)
  TETHER_CONFIG_DIR     where the device credential is kept (default $XDG_CONFIG_HOME/tether,
                        or ~/.config/tether)
  TETHER_DEVICE_NAME    the name shown on /devices (default: the host name)
  TETHER_CONCURRENCY    calls run at once (default 4)
  HTTPS_PROXY, HTTP_PROXY, NO_PROXY
                        proxy for every request to the server (the event stream included)
  TETHER_CA_FILE        extra trusted CA certificates, PEM (NODE_EXTRA_CA_CERTS works too)

Exit codes: 0 stopped (SIGINT/SIGTERM), 1 error, 2 usage, 3 not paired (request denied or expired)
or revoked (pair again),
4 another tether-host took over this device's credential.
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
export async function runCli(argv: readonly string[], tools: readonly LocalTool[], io: CliIo = defaultIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "--help" || command === "-h" || command === "help") {
    io.stdout(USAGE);
    return 0;
  }
  if (command === "--version" || command === "-v") {
    io.stdout(`${HOST_VERSION}\n`);
    return 0;
  }
  if (command === "call") return callLocally(rest, tools, io);
  if (command === "tools") {
    const listing = tools.map((tool) => ({ name: tool.name, class: tool.class, description: tool.description }));
    io.stdout(`${JSON.stringify(listing, null, 2)}\n`);
    return 0;
  }
  if (command !== undefined) {
    io.stderr(`tether-host: unknown command or option "${command}"\n\n${USAGE}`);
    return 2;
  }
  return runHost({ tools, log: (line) => io.stderr(`${line}\n`) });
}

/** `call <tool> '<json>' [--plan | --apply]`: one tool, the same roots, no server. */
async function callLocally(args: readonly string[], tools: readonly LocalTool[], io: CliIo): Promise<number> {
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
    const scope = await createScope(hostEnvironment().roots);
    const result = await invokeTool(tools, name, input, { scope, ...(mode ? { mode } : {}) });
    io.stdout(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (error instanceof ToolError) return fail(error.code, error.message);
    if (error instanceof HostConfigError) return fail("INVALID_CONFIG", error.message);
    return fail("INTERNAL", error instanceof Error ? error.message : String(error));
  }
}
