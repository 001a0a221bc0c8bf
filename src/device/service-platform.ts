import { execFile } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { isSea } from "node:sea";
import type { HostEnvironment } from "./config.js";
import { LAUNCHD_LABEL, SERVICE_NAME, SYSTEMD_UNIT, type ServiceSpec } from "./service-definitions.js";

/** The service manager of this platform: a systemd user unit, a launchd agent, a scheduled task. */
export type ServiceManager = "systemd" | "launchd" | "task";

export function serviceManagerFor(platform: NodeJS.Platform = process.platform): ServiceManager | undefined {
  if (platform === "linux") return "systemd";
  if (platform === "darwin") return "launchd";
  if (platform === "win32") return "task";
  return undefined;
}

type Env = Record<string, string | undefined>;

export interface ServicePlace {
  manager: ServiceManager;
  /** The definition file: the unit, the plist, or the task XML (registered with schtasks). */
  definition: string;
  /** Where the log goes when the manager keeps none (launchd, the task); journald otherwise. */
  logFile: string | undefined;
  /** Windows: the environment `service run` applies (tasks carry none). */
  settings: string;
}

export function servicePlace(manager: ServiceManager, config: HostEnvironment, env: Env = process.env, home = os.homedir()): ServicePlace {
  const settings = path.join(config.configDir, "service.json");
  if (manager === "systemd") {
    const base = env.XDG_CONFIG_HOME?.trim() || path.join(home, ".config");
    return { manager, definition: path.join(base, "systemd", "user", SYSTEMD_UNIT), logFile: undefined, settings };
  }
  if (manager === "launchd") {
    return {
      manager,
      definition: path.join(home, "Library", "LaunchAgents", `${LAUNCHD_LABEL}.plist`),
      logFile: path.join(home, "Library", "Logs", "tether-host", "tether-host.log"),
      settings,
    };
  }
  const local = env.LOCALAPPDATA?.trim() || path.join(home, "AppData", "Local");
  return {
    manager,
    definition: path.join(config.configDir, `${SERVICE_NAME}-task.xml`),
    logFile: path.join(local, "tether-host", "logs", "tether-host.log"),
    settings,
  };
}

/** The variables a service carries over from the shell that installs it: every override of the config file, and PATH (declared tools look programs up on it). */
const CARRIED = [
  "PATH",
  "TETHER_SERVER_URL",
  "TETHER_DEVICE_NAME",
  "TETHER_CONCURRENCY",
  "TETHER_UPDATE",
  "TETHER_AUTO_UPDATE",
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "NO_PROXY",
  "no_proxy",
] as const;

/**
 * How the service runs the host "with the current config": the same config directory (absolute), every
 * environment override in force now (roots and CA files resolved to absolute paths, since the service starts
 * elsewhere), never the one-time pairing code.
 */
export function serviceSpec(place: ServicePlace, config: HostEnvironment, env: Env = process.env, home = os.homedir()): ServiceSpec {
  const vars: Record<string, string> = { TETHER_SERVICE: place.manager, TETHER_CONFIG_DIR: config.configDir };
  for (const name of CARRIED) {
    const value = env[name]?.trim();
    if (value) vars[name] = value;
  }
  if (env.TETHER_ROOTS?.trim()) vars.TETHER_ROOTS = config.roots.join(path.delimiter);
  for (const name of ["TETHER_CA_FILE", "NODE_EXTRA_CA_CERTS"]) {
    const value = env[name]?.trim();
    if (value) vars[name] = path.resolve(value);
  }
  if (place.manager === "launchd" && place.logFile) vars.TETHER_LOG_FILE = place.logFile;
  const command = place.manager === "task" ? [...hostCommand(), "service", "run", "--config-dir", config.configDir] : [...hostCommand(), "run"];
  return { command, env: vars, workingDirectory: home };
}

/** The program that is this tether-host: the single executable, or Node and the npm package's script. */
export function hostCommand(): string[] {
  return isSea() ? [process.execPath] : [process.execPath, path.resolve(process.argv[1] ?? "")];
}

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a service manager's command line tool; a missing tool is code 127 with a message, never a throw. */
export function runTool(program: string, args: readonly string[], env: Env = process.env, timeoutMs = 30_000): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile(program, args, { env, timeout: timeoutMs, windowsHide: true, encoding: "utf8" }, (error, stdout, stderr) => {
      if (error && (error as NodeJS.ErrnoException).code === "ENOENT") return resolve({ code: 127, stdout: "", stderr: `${program} is not installed` });
      const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
      resolve({ code, stdout: stdout ?? "", stderr: (stderr ?? "").trim() });
    });
  });
}

/** `systemd 252 (252.39-1~deb12u2)` → 252; RestartSteps= needs 254. */
export async function systemdVersion(env: Env = process.env): Promise<number | undefined> {
  const result = await runTool("systemctl", ["--version"], env);
  const match = /^systemd (\d+)/.exec(result.stdout);
  return match ? Number(match[1]) : undefined;
}

export const launchdTarget = () => `gui/${os.userInfo().uid}`;
export const launchdService = () => `${launchdTarget()}/${LAUNCHD_LABEL}`;

/** `DOMAIN\user`, as Task Scheduler names the user a logon trigger is for. */
export function windowsUser(env: Env = process.env): string {
  const user = env.USERNAME || os.userInfo().username;
  return env.USERDOMAIN ? `${env.USERDOMAIN}\\${user}` : user;
}
