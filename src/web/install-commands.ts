import type { HostDownload } from "../plugins/host/downloads.js";
import { BUILDABLE_PLATFORMS, SERVER_PLATFORM } from "../plugins/host/host-build.js";

/**
 * The one copy-paste block a page gives for starting tether-host on a fresh machine: download the file
 * under its real name, check its SHA-256, make it executable, start it with `TETHER_SERVER_URL` set to
 * this server's address (and `TETHER_PAIRING_CODE` when the page minted one). Each step runs only if the
 * one before it worked (`&&`), so a file whose digest does not match is never started.
 */
export interface InstallCommand {
  platform: string;
  file: string;
  /** `sh` for Linux and macOS (bash, zsh), `powershell` for Windows. */
  shell: "sh" | "powershell";
  /** The platform in words: "Linux (x64)", "macOS (Apple silicon)", "Windows (x64)". */
  label: string;
  text: string;
}

export { SERVER_PLATFORM };

const OS_NAMES: Record<string, string> = { linux: "Linux", darwin: "macOS", win: "Windows" };

export function platformLabel(platform: string): string {
  const [os = platform, arch = ""] = platform.split("-");
  const cpu = os === "darwin" && arch === "arm64" ? "Apple silicon" : os === "darwin" && arch === "x64" ? "Intel" : arch;
  return `${OS_NAMES[os] ?? os} (${cpu})`;
}

/** A POSIX shell word: bare when it is plainly safe, else single-quoted. */
export function shellWord(value: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

/** A PowerShell single-quoted string. */
function psString(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

export function installCommand(download: HostDownload, options: { baseURL: string; pairingCode?: string | undefined }): InstallCommand {
  const base = options.baseURL.replace(/\/$/, "");
  const url = `${base}${download.path}`;
  const file = download.file;
  const label = platformLabel(download.platform);
  if (download.platform.startsWith("win-")) {
    const env = [`$env:TETHER_SERVER_URL = ${psString(base)}`, ...(options.pairingCode ? [`$env:TETHER_PAIRING_CODE = ${psString(options.pairingCode)}`] : [])];
    const text = [
      `Invoke-WebRequest -UseBasicParsing -OutFile ${psString(file)} ${psString(url)}`,
      `if ((Get-FileHash ${psString(file)} -Algorithm SHA256).Hash -ne ${psString(download.sha256)}) { throw 'SHA-256 mismatch: do not run ${file}' }`,
      `${env.join("; ")}; .\\${file}`,
    ].join("\n");
    return { platform: download.platform, file, shell: "powershell", label, text };
  }
  const check = download.platform.startsWith("darwin-") ? "shasum -a 256 -c -" : "sha256sum -c -";
  const env = [`TETHER_SERVER_URL=${shellWord(base)}`, ...(options.pairingCode ? [`TETHER_PAIRING_CODE=${shellWord(options.pairingCode)}`] : [])];
  const text = [
    `curl -fLo ${shellWord(file)} ${shellWord(url)} &&`,
    `echo ${shellWord(`${download.sha256}  ${file}`)} | ${check} &&`,
    `chmod +x ${shellWord(file)} &&`,
    `${env.join(" ")} ./${shellWord(file)}`,
  ].join("\n");
  return { platform: download.platform, file, shell: "sh", label, text };
}

/** One command per download, this machine's platform first (the usual first device is the one the server runs on). */
export function installCommands(downloads: readonly HostDownload[], options: { baseURL: string; pairingCode?: string | undefined }): InstallCommand[] {
  const ordered = [...downloads].sort((a, b) => Number(b.platform === SERVER_PLATFORM) - Number(a.platform === SERVER_PLATFORM));
  return ordered.map((download) => installCommand(download, options));
}

/** The platforms tether-host is made for that this server does not offer, in words ("macOS (Intel)"). */
export function unavailablePlatforms(downloads: readonly HostDownload[]): string[] {
  const offered = new Set(downloads.map((download) => download.platform));
  return BUILDABLE_PLATFORMS.filter((platform) => !offered.has(platform)).map(platformLabel);
}
