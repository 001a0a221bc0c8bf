/**
 * The device side of the connector: `runHost({ server, tools, roots })` and the `tether-host` command
 * (`runCli`). A consumer's own executable passes its domain tools next to the built-ins:
 *
 *     import { builtinTools, defineShellTool } from "tether/tools";
 *     import { runCli } from "tether/device";
 *     runCli(process.argv.slice(2), [...builtinTools, convertIfc]).then((code) => process.exit(code));
 */
export { runHost, ExitCode, backoffDelay, type RunHostOptions } from "./host.js";
export { runCli, USAGE, type CliIo } from "./cli.js";
export { hostEnvironment, resolveHostConfig, HostConfigError, DEFAULT_SERVER_URL, type HostEnvironment, type UpdatePolicy } from "./config.js";
export { updateExecutable, type UpdateOutcome } from "./update.js";
export type { HostUpdates } from "./host-updates.js";
export { loadCredential, saveCredential, forgetCredential, credentialPath, type DeviceCredential } from "./credentials.js";
export { HostClient, ServerError } from "./client.js";
export { readEventStream, type SseMessage } from "./sse.js";
export { HOST_VERSION, HOST_AGENT } from "./version.js";
