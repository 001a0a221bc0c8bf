import os from "node:os";
import path from "node:path";
import { defineShellTool, ToolError, type LocalTool, type ShellToolDefinition } from "../tools/index.js";
import { CONFIG_FILE, expandHome, HostConfigError, readConfigFile, UPDATE_POLICIES, type UpdatePolicy } from "./config-file.js";

export { HostConfigError, type UpdatePolicy } from "./config-file.js";

/** The device's settings: the config file, then the environment over it. */
export interface HostEnvironment {
  server: string;
  roots: string[];
  configDir: string;
  /** `<configDir>/config.json`, whether or not it exists. */
  configFile: string;
  pairingCode: string | undefined;
  name: string;
  platform: string;
  concurrency: number;
  /** Proxy for every request to the server (both schemes), `noProxy` its exceptions; undefined: none. */
  proxy: string | undefined;
  noProxy: string | undefined;
  caFile: string | undefined;
  update: UpdatePolicy;
  /** Shell tools the operator declared in the config file (`tether-host` serves them beside the built-ins). */
  tools: ShellToolDefinition[];
}

/** Where each value came from: `default`, `config file`, or the environment variable's name. */
export type ConfigSources = Record<Exclude<keyof HostEnvironment, "platform" | "configFile">, string>;

export const DEFAULT_SERVER_URL = "http://localhost:3000";
export const DEFAULT_CONCURRENCY = 4;

type Env = Record<string, string | undefined>;

/** The first variable of `names` that is set (non-empty), and its name. */
function fromEnv(env: Env, ...names: string[]): { name: string; value: string } | undefined {
  for (const name of names) {
    const value = env[name]?.trim();
    if (value) return { name, value };
  }
  return undefined;
}

/**
 * Everything the device needs, with where it came from. The directory is `TETHER_CONFIG_DIR`, else the
 * platform's (see `configDirectory`); its `config.json` is optional; each environment variable overrides
 * its key:
 *
 * | key           | variable                          | default                |
 * | `server`      | `TETHER_SERVER_URL`               | `http://localhost:3000` |
 * | `roots`       | `TETHER_ROOTS` (path.delimiter)   | the working directory  |
 * | `name`        | `TETHER_DEVICE_NAME`              | the host name          |
 * | `concurrency` | `TETHER_CONCURRENCY`              | 4                      |
 * | `proxy`       | `HTTPS_PROXY`, `HTTP_PROXY`       | none                   |
 * | `noProxy`     | `NO_PROXY`                        | none                   |
 * | `caFile`      | `TETHER_CA_FILE`                  | none                   |
 * | `update`      | `TETHER_UPDATE`, `TETHER_AUTO_UPDATE=1` | `notify`         |
 *
 * In the file, relative roots and `~` are taken from the home directory (a service runs elsewhere than the
 * shell that wrote it); in `TETHER_ROOTS`, from the working directory.
 */
export function resolveHostConfig(env: Env = process.env, cwd = process.cwd()): { config: HostEnvironment; sources: ConfigSources } {
  const configDir = configDirectory(env);
  const configFile = path.join(configDir, CONFIG_FILE);
  const file = readConfigFile(configFile) ?? {};
  const inFile = "config file";
  const home = os.homedir();

  const server = fromEnv(env, "TETHER_SERVER_URL");
  const roots = fromEnv(env, "TETHER_ROOTS");
  const name = fromEnv(env, "TETHER_DEVICE_NAME");
  const concurrency = fromEnv(env, "TETHER_CONCURRENCY");
  const proxy = fromEnv(env, "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY");
  const noProxy = fromEnv(env, "no_proxy", "NO_PROXY");
  const caFile = fromEnv(env, "TETHER_CA_FILE");
  const update = updateFromEnv(env);

  const pick = <T>(variable: { name: string; value: T } | undefined, configured: T | undefined, fallback: T): [T, string] =>
    variable ? [variable.value, variable.name] : configured !== undefined ? [configured, inFile] : [fallback, "default"];

  const [serverValue, serverSource] = pick(server, file.server, DEFAULT_SERVER_URL);
  const [updateValue, updateSource] = pick(update, file.update, "notify");
  const [nameValue, nameSource] = pick(name, file.name, os.hostname() || "device");
  const config: HostEnvironment = {
    server: normalizeServerUrl(serverValue, serverSource === inFile ? `${configFile}: "server"` : "TETHER_SERVER_URL"),
    roots: roots
      ? parseRoots(roots.value, cwd)
      : file.roots
        ? [...new Set(file.roots.map((root) => path.resolve(home, expandHome(root.trim(), home))))]
        : [cwd],
    configDir,
    configFile,
    pairingCode: env.TETHER_PAIRING_CODE?.trim() || undefined,
    name: nameValue.trim(),
    platform: hostPlatform(),
    concurrency: concurrency ? parseConcurrency(concurrency.value) : (file.concurrency ?? DEFAULT_CONCURRENCY),
    proxy: proxy?.value ?? file.proxy,
    noProxy: noProxy?.value ?? file.noProxy,
    caFile: caFile?.value ?? (file.caFile ? path.resolve(configDir, expandHome(file.caFile, home)) : undefined),
    update: updateValue,
    tools: file.tools ?? [],
  };
  if (config.proxy && !proxy) checkProxy(config.proxy, `${configFile}: "proxy"`);
  const sources: ConfigSources = {
    server: serverSource,
    roots: roots ? roots.name : file.roots ? inFile : "default: the working directory",
    configDir: env.TETHER_CONFIG_DIR?.trim() ? "TETHER_CONFIG_DIR" : "default",
    pairingCode: config.pairingCode ? "TETHER_PAIRING_CODE" : "default",
    name: nameSource === "default" ? "default: the host name" : nameSource,
    concurrency: concurrency ? concurrency.name : file.concurrency !== undefined ? inFile : "default",
    proxy: proxy ? proxy.name : file.proxy ? inFile : "default",
    noProxy: noProxy ? noProxy.name : file.noProxy ? inFile : "default",
    caFile: caFile ? caFile.name : file.caFile ? inFile : "default",
    update: updateSource,
    tools: file.tools ? inFile : "default",
  };
  return { config, sources };
}

/** The device's settings (see `resolveHostConfig`); throws `HostConfigError` naming the bad value. */
export function hostEnvironment(env: Env = process.env, cwd = process.cwd()): HostEnvironment {
  return resolveHostConfig(env, cwd).config;
}

function updateFromEnv(env: Env): { name: string; value: UpdatePolicy } | undefined {
  const policy = fromEnv(env, "TETHER_UPDATE");
  const auto = fromEnv(env, "TETHER_AUTO_UPDATE");
  let fromAuto: UpdatePolicy | undefined;
  if (auto) {
    const word = auto.value.toLowerCase();
    if (["1", "true", "yes", "on"].includes(word)) fromAuto = "auto";
    else if (["0", "false", "no", "off"].includes(word)) fromAuto = "notify";
    else throw new HostConfigError(`TETHER_AUTO_UPDATE=${auto.value} is not 1 or 0`);
  }
  if (policy) {
    if (!UPDATE_POLICIES.includes(policy.value as UpdatePolicy))
      throw new HostConfigError(`TETHER_UPDATE=${policy.value} is not one of ${UPDATE_POLICIES.join(", ")}`);
    if (fromAuto && (fromAuto === "auto") !== (policy.value === "auto")) {
      throw new HostConfigError(`TETHER_UPDATE=${policy.value} and TETHER_AUTO_UPDATE=${auto!.value} disagree; set one`);
    }
    return { name: "TETHER_UPDATE", value: policy.value as UpdatePolicy };
  }
  return fromAuto ? { name: "TETHER_AUTO_UPDATE", value: fromAuto } : undefined;
}

/**
 * The environment the device's network layer reads (src/device/http.ts): the process's, with the config
 * file's proxy and CA filled in where no variable sets them.
 */
export function networkEnvironment(config: HostEnvironment, env: Env = process.env): Env {
  const merged: Env = { ...env };
  const proxySet = ["https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"].some((name) => env[name]?.trim());
  if (!proxySet && config.proxy) merged.HTTPS_PROXY = merged.HTTP_PROXY = config.proxy;
  if (!env.no_proxy?.trim() && !env.NO_PROXY?.trim() && config.noProxy) merged.NO_PROXY = config.noProxy;
  if (!env.TETHER_CA_FILE?.trim() && config.caFile) merged.TETHER_CA_FILE = config.caFile;
  return merged;
}

/** The operator's declared tools, defined; a declaration `defineShellTool` refuses is a configuration error. */
export function declaredTools(config: HostEnvironment, builtins: readonly LocalTool[]): LocalTool[] {
  const names = new Set(builtins.map((tool) => tool.name));
  return config.tools.map((declaration, index) => {
    if (names.has(declaration.name)) throw new HostConfigError(`${config.configFile}: tools[${index}]: "${declaration.name}" is already a tool's name`);
    names.add(declaration.name);
    try {
      return defineShellTool(declaration);
    } catch (error) {
      if (error instanceof ToolError) throw new HostConfigError(`${config.configFile}: tools[${index}]: ${error.message}`);
      throw error;
    }
  });
}

/** `linux-x64`, `linux-arm64`, `win-x64`, `darwin-arm64`: as download file names and npm's node-<platform> packages spell it. */
export function hostPlatform(): string {
  return `${process.platform === "win32" ? "win" : process.platform}-${process.arch}`;
}

export function normalizeServerUrl(raw: string, setting = "TETHER_SERVER_URL"): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new HostConfigError(`${setting}=${raw} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new HostConfigError(`${setting}=${raw} is not an http(s) URL`);
  if (url.username || url.password || url.search || url.hash) throw new HostConfigError(`${setting}=${raw} must be a plain base address`);
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

function checkProxy(raw: string, setting: string): void {
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) throw new HostConfigError(`${setting}=${raw} is not an http(s) proxy URL`);
}

export function parseRoots(raw: string | undefined, cwd: string): string[] {
  const entries = (raw ?? "")
    .split(path.delimiter)
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  if (entries.length === 0) return [cwd];
  return [...new Set(entries.map((entry) => path.resolve(cwd, entry)))];
}

/**
 * `TETHER_CONFIG_DIR`, else the platform's configuration directory, `tether-host` in it: `$XDG_CONFIG_HOME`
 * or `~/.config` on Linux; `~/Library/Application Support` on macOS (`$XDG_CONFIG_HOME` when set);
 * `%APPDATA%` on Windows. It holds `config.json`, the credential and the running host's state.
 */
export function configDirectory(env: Env, platform: NodeJS.Platform = process.platform, home = os.homedir()): string {
  if (env.TETHER_CONFIG_DIR?.trim()) return path.resolve(env.TETHER_CONFIG_DIR.trim());
  const join = (...parts: string[]) => (platform === "win32" ? path.win32.join(...parts) : path.posix.join(...parts));
  if (platform === "win32") return join(env.APPDATA?.trim() || join(home, "AppData", "Roaming"), "tether-host");
  if (env.XDG_CONFIG_HOME?.trim()) return join(env.XDG_CONFIG_HOME.trim(), "tether-host");
  if (platform === "darwin") return join(home, "Library", "Application Support", "tether-host");
  return join(home, ".config", "tether-host");
}

function parseConcurrency(raw: string): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > 64) throw new HostConfigError(`TETHER_CONCURRENCY=${raw} is not a whole number from 1 to 64`);
  return value;
}
