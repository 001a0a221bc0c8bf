import os from "node:os";
import path from "node:path";

/** The device's settings, from the environment (the CLI's only configuration). */
export interface HostEnvironment {
  server: string;
  roots: string[];
  configDir: string;
  pairingCode: string | undefined;
  name: string;
  platform: string;
  concurrency: number;
}

export const DEFAULT_SERVER_URL = "http://localhost:3000";
export const DEFAULT_CONCURRENCY = 4;

export class HostConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HostConfigError";
  }
}

type Env = Record<string, string | undefined>;

/**
 * - `TETHER_SERVER_URL`: the server's base address (default `http://localhost:3000`);
 * - `TETHER_PAIRING_CODE`: the one-time code, needed at first start only;
 * - `TETHER_ROOTS`: allowed roots, separated by `path.delimiter` (`:`, or `;` on Windows); relative
 *   entries resolve against the working directory; default: the working directory;
 * - `TETHER_CONFIG_DIR`: where the credential is kept (default `$XDG_CONFIG_HOME/tether` or
 *   `~/.config/tether`);
 * - `TETHER_DEVICE_NAME` (default: the host name), `TETHER_CONCURRENCY` (calls at once, default 4).
 */
export function hostEnvironment(env: Env = process.env, cwd = process.cwd()): HostEnvironment {
  return {
    server: normalizeServerUrl(env.TETHER_SERVER_URL?.trim() || DEFAULT_SERVER_URL),
    roots: parseRoots(env.TETHER_ROOTS, cwd),
    configDir: configDirectory(env),
    pairingCode: env.TETHER_PAIRING_CODE?.trim() || undefined,
    name: env.TETHER_DEVICE_NAME?.trim() || os.hostname() || "device",
    platform: hostPlatform(),
    concurrency: parseConcurrency(env.TETHER_CONCURRENCY),
  };
}

/** `linux-x64`, `linux-arm64`, `win-x64`, `darwin-arm64`: as download file names and npm's node-<platform> packages spell it. */
export function hostPlatform(): string {
  return `${process.platform === "win32" ? "win" : process.platform}-${process.arch}`;
}

export function normalizeServerUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new HostConfigError(`TETHER_SERVER_URL=${raw} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new HostConfigError(`TETHER_SERVER_URL=${raw} is not an http(s) URL`);
  if (url.username || url.password || url.search || url.hash) throw new HostConfigError(`TETHER_SERVER_URL=${raw} must be a plain base address`);
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

export function parseRoots(raw: string | undefined, cwd: string): string[] {
  const entries = (raw ?? "").split(path.delimiter).map((entry) => entry.trim()).filter((entry) => entry !== "");
  if (entries.length === 0) return [cwd];
  return [...new Set(entries.map((entry) => path.resolve(cwd, entry)))];
}

export function configDirectory(env: Env): string {
  if (env.TETHER_CONFIG_DIR?.trim()) return path.resolve(env.TETHER_CONFIG_DIR.trim());
  const base = env.XDG_CONFIG_HOME?.trim() || path.join(os.homedir(), ".config");
  return path.join(base, "tether");
}

function parseConcurrency(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === "") return DEFAULT_CONCURRENCY;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > 64) throw new HostConfigError(`TETHER_CONCURRENCY=${raw} is not a whole number from 1 to 64`);
  return value;
}
