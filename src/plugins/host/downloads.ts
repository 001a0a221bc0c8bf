import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { HOST_VERSION } from "../../device/version.js";
import { MANIFEST_FILE, MAX_MANIFEST_BYTES } from "../../protocol/manifest.js";
import { parseVersion } from "../../protocol/versions.js";
import { readBuildStatus, type HostBuildStatus } from "./host-build.js";

/**
 * The device executables this server offers, read from a directory (`DOWNLOADS_DIR`, default
 * `dist/downloads`, which `npm run build:host [-- --target <platform>]` fills): one file per platform,
 * `tether-host-<os>-<arch>[.exe]`, and the signed `manifest.json` naming their version, sizes and digests
 * (src/protocol/manifest.ts). The server passes the manifest on as it is: devices verify its signature
 * with the keys built into them, never trusting the server. Each file's SHA-256 is also computed here, from
 * the bytes served, once per (size, modification time), for the listing and `.sha256` files.
 */
export interface HostDownload {
  /** `linux-x64`, `linux-arm64`, `win-x64`, … */
  platform: string;
  file: string;
  size: number;
  sha256: string;
  /** Path on this server: `/downloads/<file>`. */
  path: string;
}

export interface DownloadCatalog {
  /** The tether-host version on offer (the manifest's, else this server's own). */
  version(): Promise<string>;
  list(): Promise<HostDownload[]>;
  /** The file behind `/downloads/<file>`, or undefined for anything else. */
  find(file: string): Promise<(HostDownload & { absolutePath: string }) | undefined>;
  /** The signed manifest's bytes, as built; undefined when there is none. */
  manifest(): Promise<Buffer | undefined>;
  /** An executable being built in the background, or a build that failed (host-build.ts); undefined: neither. */
  buildStatus(): Promise<HostBuildStatus | undefined>;
}

const EXECUTABLE_NAME = /^tether-host-((?:linux|darwin|win)-(?:x64|arm64))(\.exe)?$/;
export const DOWNLOADS_PATH = "/downloads";

export function downloadCatalog(dir: string): DownloadCatalog {
  const digests = new Map<string, { key: string; sha256: string }>();

  const sha256Of = async (file: string, size: number, mtimeMs: number): Promise<string> => {
    const key = `${size}:${mtimeMs}`;
    const cached = digests.get(file);
    if (cached?.key === key) return cached.sha256;
    const hash = createHash("sha256");
    for await (const chunk of createReadStream(path.join(dir, file))) hash.update(chunk as Buffer);
    const sha256 = hash.digest("hex");
    digests.set(file, { key, sha256 });
    return sha256;
  };

  const describe = async (file: string): Promise<(HostDownload & { absolutePath: string }) | undefined> => {
    const match = EXECUTABLE_NAME.exec(file);
    if (!match) return undefined;
    const absolutePath = path.join(dir, file);
    let info;
    try {
      info = await stat(absolutePath);
    } catch {
      return undefined;
    }
    if (!info.isFile()) return undefined;
    return {
      platform: match[1]!,
      file,
      size: info.size,
      sha256: await sha256Of(file, info.size, info.mtimeMs),
      path: `${DOWNLOADS_PATH}/${file}`,
      absolutePath,
    };
  };

  return {
    async version() {
      try {
        // The signed format's version, or the unsigned `{ version }` older builds wrote (a notice only: devices verify).
        const manifest = JSON.parse(await readFile(path.join(dir, MANIFEST_FILE), "utf8")) as { version?: unknown; signed?: { version?: unknown } };
        const version = manifest.signed?.version ?? manifest.version;
        if (typeof version === "string" && parseVersion(version)) return version;
      } catch {
        /* no manifest: the executables, if any, were built from this very package */
      }
      return HOST_VERSION;
    },
    async manifest() {
      try {
        const bytes = await readFile(path.join(dir, MANIFEST_FILE));
        return bytes.length <= MAX_MANIFEST_BYTES ? bytes : undefined;
      } catch {
        return undefined;
      }
    },
    async list() {
      let files: string[];
      try {
        files = await readdir(dir);
      } catch {
        return [];
      }
      const found = await Promise.all(
        files
          .filter((file) => EXECUTABLE_NAME.test(file))
          .sort()
          .map(describe),
      );
      return found.filter((download) => download !== undefined).map(({ absolutePath: _, ...download }) => download);
    },
    find: describe,
    buildStatus: () => readBuildStatus(dir),
  };
}
