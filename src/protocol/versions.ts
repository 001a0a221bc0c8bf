/**
 * tether-host versions: the device announces `tether-host/<version>` at hello, the server offers
 * executables of one version (src/plugins/host/downloads.ts); a device older than that is told once
 * on connect, and its owner sees a note on /devices. Nothing ever updates itself.
 */

/** `1.2.3` (a pre-release or build suffix is ignored); undefined if not a version. */
export function parseVersion(version: string): [number, number, number] | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : undefined;
}

/** True when `running` is older than `offered` (unparseable versions are never "older"). */
export function isOlderVersion(running: string, offered: string): boolean {
  const a = parseVersion(running);
  const b = parseVersion(offered);
  if (!a || !b) return false;
  for (let i = 0; i < 3; i++) if (a[i]! !== b[i]!) return a[i]! < b[i]!;
  return false;
}

/** `tether-host/0.1.0` → `0.1.0` (the agent a device announces at hello). */
export function agentVersion(agent: string | null | undefined): string | undefined {
  const match = /^tether-host\/(\S+)/.exec(agent ?? "");
  return match?.[1];
}
