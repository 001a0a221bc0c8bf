import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { ShellToolDefinition } from "../tools/index.js";

/**
 * The device's configuration file, `config.json` in its configuration directory: one JSON object, every key
 * optional, no other keys (a misspelt key is an error, not silently ignored).
 *
 *   {
 *     "server": "https://tether.example.com",
 *     "roots": ["~/projects", "/srv/models"],
 *     "name": "build-box",
 *     "concurrency": 4,
 *     "proxy": "http://proxy.corp:3128",
 *     "noProxy": "localhost,.corp",
 *     "caFile": "/etc/ssl/certs/corp-root.pem",
 *     "update": "notify",
 *     "tools": [{ "name": "convert_ifc", "description": "Convert an IFC model",
 *                 "command": ["ifctool", "convert", "{from}"], "args": { "from": { "type": "path" } } }]
 *   }
 *
 * JSON rather than YAML or TOML: Node reads it without a parser dependency in the executable, and
 * `tether-host config` shows what was understood. Environment variables override each value.
 */
export interface HostConfigFile {
  server?: string;
  roots?: string[];
  name?: string;
  concurrency?: number;
  proxy?: string;
  noProxy?: string;
  caFile?: string;
  update?: UpdatePolicy;
  tools?: ShellToolDefinition[];
}

/**
 * - `auto`: install a newer release when the server announces one (checked on connect);
 * - `notify` (the default): say that one exists; `tether-host update` installs it;
 * - `off`: pinned: neither, and `tether-host update` refuses unless given `--force`.
 */
export type UpdatePolicy = "auto" | "notify" | "off";
export const UPDATE_POLICIES: readonly UpdatePolicy[] = ["auto", "notify", "off"];

export const CONFIG_FILE = "config.json";

/** A setting that cannot be used: one line saying which and why; the CLI exits with code 2. */
export class HostConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HostConfigError";
  }
}

const KEYS = ["server", "roots", "name", "concurrency", "proxy", "noProxy", "caFile", "update", "tools"] as const;
const TOOL_KEYS = new Set(["name", "description", "command", "args", "class", "timeoutMs", "maxOutputBytes", "cwd", "env"]);

/** `~/x` and `~` name the home directory; anything else is taken as it is. */
export function expandHome(value: string, home = os.homedir()): string {
  if (value === "~") return home;
  if (value.startsWith("~/") || value.startsWith("~\\")) return path.join(home, value.slice(2));
  return value;
}

const show = (value: unknown) => {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
};

/** Reads and checks the file; undefined when there is none. */
export function readConfigFile(file: string): HostConfigFile | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw new HostConfigError(`${file} cannot be read: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new HostConfigError(`${file} is not valid JSON: ${(error as Error).message}`);
  }
  return checkConfig(parsed, file);
}

export function checkConfig(parsed: unknown, file: string): HostConfigFile {
  const fail = (message: string): never => {
    throw new HostConfigError(`${file}: ${message}`);
  };
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) fail("must hold one JSON object");
  const config = parsed as Record<string, unknown>;
  for (const key of Object.keys(config)) {
    if (!(KEYS as readonly string[]).includes(key)) fail(`unknown setting "${key.slice(0, 40)}" (known: ${KEYS.join(", ")})`);
  }
  const text = (key: string) => {
    const value = config[key];
    if (value !== undefined && (typeof value !== "string" || value.trim() === "")) fail(`"${key}" must be a non-empty string (got ${show(value)})`);
  };
  for (const key of ["server", "name", "proxy", "noProxy", "caFile"]) text(key);
  if (
    config.roots !== undefined &&
    (!Array.isArray(config.roots) || config.roots.length === 0 || config.roots.some((root) => typeof root !== "string" || root.trim() === ""))
  ) {
    fail(`"roots" must be a non-empty list of folder paths (got ${show(config.roots)})`);
  }
  if (
    config.concurrency !== undefined &&
    (!Number.isInteger(config.concurrency) || (config.concurrency as number) < 1 || (config.concurrency as number) > 64)
  ) {
    fail(`"concurrency" must be a whole number from 1 to 64 (got ${show(config.concurrency)})`);
  }
  if (config.update !== undefined && !UPDATE_POLICIES.includes(config.update as UpdatePolicy)) {
    fail(`"update" must be one of ${UPDATE_POLICIES.map((policy) => `"${policy}"`).join(", ")} (got ${show(config.update)})`);
  }
  if (config.tools !== undefined) {
    if (!Array.isArray(config.tools)) fail(`"tools" must be a list of shell tool declarations (got ${show(config.tools)})`);
    (config.tools as unknown[]).forEach((tool, index) => checkToolShape(tool, `tools[${index}]`, fail));
  }
  return config;
}

/** The JSON shape of a declared tool; `defineShellTool` then checks what the declaration means. */
function checkToolShape(tool: unknown, where: string, fail: (message: string) => never): void {
  if (typeof tool !== "object" || tool === null || Array.isArray(tool)) fail(`${where} must be an object`);
  const declared = tool as Record<string, unknown>;
  for (const key of Object.keys(declared)) if (!TOOL_KEYS.has(key)) fail(`${where}: unknown key "${key.slice(0, 40)}" (known: ${[...TOOL_KEYS].join(", ")})`);
  if (typeof declared.name !== "string") fail(`${where}.name must be a string`);
  const name = `${where} (${declared.name})`;
  if (typeof declared.description !== "string") fail(`${name}.description must be a string`);
  if (!Array.isArray(declared.command)) fail(`${name}.command must be a list: the program, then its arguments`);
  if (declared.args !== undefined && (typeof declared.args !== "object" || declared.args === null || Array.isArray(declared.args)))
    fail(`${name}.args must be an object`);
  if (declared.class !== undefined && declared.class !== "read" && declared.class !== "action") fail(`${name}.class must be "read" or "action"`);
  for (const key of ["timeoutMs", "maxOutputBytes"]) {
    const value = declared[key];
    if (value !== undefined && (!Number.isInteger(value) || (value as number) < 1)) fail(`${name}.${key} must be a positive whole number`);
  }
  if (declared.cwd !== undefined && typeof declared.cwd !== "string") fail(`${name}.cwd must be a string`);
  if (
    declared.env !== undefined &&
    (typeof declared.env !== "object" || declared.env === null || Object.values(declared.env).some((value) => typeof value !== "string"))
  ) {
    fail(`${name}.env must map names to strings`);
  }
}
