import { isSea } from "node:sea";
import { isOlderVersion } from "../protocol/index.js";
import { HostClient } from "./client.js";
import { hostPlatform, networkEnvironment, type ConfigSources, type HostEnvironment } from "./config.js";
import { credentialPath, loadCredential } from "./credentials.js";
import { recordUpdate, reportOf } from "./host-updates.js";
import { deviceRequest, networkDispatcher } from "./http.js";
import { restartRunningService } from "./service.js";
import { servicePlace, serviceManagerFor } from "./service-platform.js";
import { processAlive, readState, readUpdateReport } from "./state.js";
import { updateExecutable } from "./update.js";
import { UPDATE_KEYS } from "./update-keys.js";
import { HOST_VERSION } from "./version.js";

/** `tether-host config`, `status` and `update`: the commands about the device itself rather than its tools. */
export interface AdminIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: Record<string, string | undefined>;
}

/** `0.1.0` then `node 24.21.0 (linux-x64)`: scripts take the first line. */
export function versionText(): string {
  return `${HOST_VERSION}\nnode ${process.versions.node} (${hostPlatform()})\n`;
}

function table(rows: Array<[string, string, string?]>): string {
  const width = Math.max(...rows.map(([label]) => label.length)) + 2;
  return rows.map(([label, value, source]) => `${label.padEnd(width)}${value}${source ? `   (${source})` : ""}`.trimEnd()).join("\n") + "\n";
}

/** `tether-host config [--json]`: the effective configuration, and where each value came from. */
export function showConfig(config: HostEnvironment, sources: ConfigSources, io: AdminIo, json: boolean): number {
  const values = {
    server: config.server,
    roots: config.roots,
    name: config.name,
    concurrency: config.concurrency,
    proxy: config.proxy ? redactProxy(config.proxy) : null,
    noProxy: config.noProxy ?? null,
    caFile: config.caFile ?? null,
    update: config.update,
    tools: config.tools.map((tool) => tool.name),
  };
  if (json) {
    const entries = Object.fromEntries(Object.entries(values).map(([key, value]) => [key, { value, source: sources[key as keyof ConfigSources] }]));
    io.stdout(
      `${JSON.stringify({ configDir: config.configDir, configFile: config.configFile, credentials: credentialPath(config.configDir), settings: entries }, null, 2)}\n`,
    );
    return 0;
  }
  io.stdout(
    table([
      [
        "config file",
        config.configFile,
        sources.tools === "config file" || Object.values(sources).includes("config file") ? "read" : "none: defaults and environment only",
      ],
      ["server", values.server, sources.server],
      ["roots", values.roots.join(", "), sources.roots],
      ["name", values.name, sources.name],
      ["concurrency", String(values.concurrency), sources.concurrency],
      ["proxy", values.proxy ?? "none", sources.proxy],
      ["no proxy", values.noProxy ?? "none", sources.noProxy],
      ["CA file", values.caFile ?? "none", sources.caFile],
      ["update", values.update, sources.update],
      ["tools", values.tools.length > 0 ? values.tools.join(", ") : "built-ins only", sources.tools],
      ["credentials", credentialPath(config.configDir)],
    ]),
  );
  return 0;
}

/** A proxy URL without its password. */
function redactProxy(proxy: string): string {
  try {
    const url = new URL(proxy);
    if (url.password) url.password = "***";
    return url.toString().replace(/\/$/, "");
  } catch {
    return proxy;
  }
}

/** `tether-host status [--json]`: enrolled or not, connected or not and since when, version, roots, pending update. */
export async function showStatus(config: HostEnvironment, io: AdminIo, json: boolean): Promise<number> {
  const credential = await loadCredential(config.configDir, config.server).catch(() => undefined);
  const state = await readState(config.configDir);
  const running = state && state.server === config.server && processAlive(state.pid) ? state : undefined;
  const stored = await readUpdateReport(config.configDir);
  const offered = running?.offered;
  const pending = offered && isOlderVersion(running?.version ?? HOST_VERSION, offered) ? offered : undefined;
  const restartPending = running && running.version !== HOST_VERSION ? HOST_VERSION : undefined;
  const outdated = running?.minimum && isOlderVersion(running.version, running.minimum) ? running.minimum : undefined;
  const status = {
    version: HOST_VERSION,
    node: process.versions.node,
    platform: hostPlatform(),
    server: config.server,
    enrolled: credential ? { deviceId: credential.deviceId, name: credential.name, pairedAt: credential.pairedAt } : null,
    running: running
      ? {
          pid: running.pid,
          version: running.version,
          connected: running.connected,
          since: running.since,
          lastError: running.lastError ?? null,
          service: running.service ?? null,
        }
      : null,
    roots: config.roots,
    update: {
      policy: config.update,
      offered: offered ?? null,
      pending: pending ?? null,
      restartPending: restartPending ?? null,
      belowMinimum: outdated ?? null,
    },
    lastUpdate: stored ? { ...stored.report, reported: stored.reported } : null,
  };
  if (json) {
    io.stdout(`${JSON.stringify(status, null, 2)}\n`);
    return 0;
  }
  const last = stored?.report;
  io.stdout(
    table([
      ["version", `${HOST_VERSION} (node ${process.versions.node}, ${hostPlatform()})`],
      ["server", config.server],
      ["enrolled", credential ? `yes, device ${credential.deviceId} "${credential.name}" since ${credential.pairedAt}` : "no: run tether-host to enroll"],
      [
        "connected",
        running
          ? `${running.connected ? "yes" : "no"}, since ${running.since} (pid ${running.pid}${running.service ? `, ${running.service} service` : ""})${!running.connected && running.lastError ? `: ${running.lastError}` : ""}`
          : "no: tether-host is not running",
      ],
      ["roots", config.roots.join(", ")],
      [
        "update",
        `${config.update}${pending ? `; ${pending} is offered: run \`tether-host update\`` : offered ? `; up to date with the server (${offered})` : ""}${restartPending ? `; ${restartPending} is installed, the running host is ${running!.version}: restart it` : ""}${outdated ? `; below the server's minimum ${outdated}` : ""}`,
      ],
      ...(last
        ? ([
            [
              "last update",
              `${last.ok ? "updated" : "failed"} ${last.from} → ${last.to ?? "?"} (${last.trigger}) at ${last.at}${last.ok ? "" : `: ${last.code} ${last.message ?? ""}`}${stored.reported ? "" : "; not yet reported to the server"}`,
            ],
          ] as Array<[string, string]>)
        : []),
    ]),
  );
  return 0;
}

/**
 * `tether-host update [--force]`: installs the server's newer release (see update.ts), reports how it went,
 * and restarts the installed service if one runs. 0: updated or already current; 1: refused or failed.
 */
export async function runUpdate(config: HostEnvironment, sources: ConfigSources, io: AdminIo, force: boolean): Promise<number> {
  const log = (line: string) => io.stderr(`${line}\n`);
  if (config.update === "off" && !force) {
    log(`tether-host: updates are pinned off ("update": "off", from ${sources.update}); \`tether-host update --force\` updates anyway`);
    return 1;
  }
  if (!isSea()) {
    log(
      `tether-host: \`update\` replaces the single executable; this tether-host runs on Node from ${process.argv[1] ?? "a script"}: update the npm package instead`,
    );
    return 1;
  }
  const request = deviceRequest(networkDispatcher(networkEnvironment(config, io.env)));
  const outcome = await updateExecutable({
    server: config.server,
    request,
    executable: process.execPath,
    version: HOST_VERSION,
    platform: hostPlatform(),
    trustedKeys: UPDATE_KEYS,
    log,
  });
  if (outcome.status === "current") {
    log(`tether-host: ${HOST_VERSION} is the version the server offers; nothing to do`);
    return 0;
  }
  const credential = await loadCredential(config.configDir, config.server).catch(() => undefined);
  const client = credential ? new HostClient(config.server, credential.token, request) : undefined;
  await recordUpdate(config.configDir, client, reportOf(outcome, "manual")!, log);
  if (outcome.status !== "updated") return 1;
  const manager = serviceManagerFor();
  if (manager && !io.env.TETHER_SERVICE) {
    const restarted = await restartRunningService(servicePlace(manager, config, io.env), io.env).catch(
      (error: unknown) => `could not restart the service: ${(error as Error).message}`,
    );
    if (restarted) log(`tether-host: ${restarted}`);
  }
  return 0;
}
