import type { HostEnvironment } from "./config.js";
import { loadCredential } from "./credentials.js";
import { describeManager, installService, managerStatus, showLogs, uninstallService } from "./service.js";
import { serviceManagerFor, servicePlace } from "./service-platform.js";
import { showStatus, type AdminIo } from "./cli-admin.js";
import { superviseHost } from "./supervisor.js";

export const SERVICE_USAGE = `Usage: tether-host service install [--files-only] | uninstall [--files-only] | status | logs [-n <lines>] [-f]`;

/**
 * `tether-host service …`. Exit codes: 0 done (install and uninstall may be repeated); 1 the service manager
 * refused (its message follows); 2 usage; `status`: 0 running, 3 installed but not running, 4 not installed.
 */
export async function runService(args: readonly string[], config: HostEnvironment, io: AdminIo): Promise<number> {
  const [command, ...rest] = args;
  const flags = new Set(rest.filter((arg) => arg.startsWith("-")));
  const out = (line: string) => io.stdout(`${line}\n`);
  const usage = () => {
    io.stderr(`tether-host: ${SERVICE_USAGE}\n`);
    return 2;
  };
  if (command === "run") {
    const at = rest.indexOf("--config-dir");
    return superviseHost({ configDir: at >= 0 && rest[at + 1] ? rest[at + 1]! : config.configDir, env: io.env, stderr: io.stderr });
  }
  const manager = serviceManagerFor();
  if (!manager) {
    io.stderr(`tether-host: no service manager is supported on ${process.platform}; run \`tether-host service run\` from your own init system\n`);
    return 1;
  }
  const place = servicePlace(manager, config, io.env);
  const serviceIo = { out, env: io.env };
  const filesOnly = flags.has("--files-only");
  try {
    switch (command) {
      case "install": {
        if ([...flags].some((flag) => flag !== "--files-only")) return usage();
        if (!filesOnly && !(await loadCredential(config.configDir, config.server))) {
          io.stderr(
            `tether-host: not enrolled with ${config.server} yet: run \`tether-host\` once in a terminal to enroll (or with TETHER_PAIRING_CODE), then install the service\n`,
          );
          return 1;
        }
        return await installService(place, config, serviceIo, { filesOnly });
      }
      case "uninstall":
        if ([...flags].some((flag) => flag !== "--files-only")) return usage();
        return await uninstallService(place, serviceIo, { filesOnly });
      case "status": {
        if (flags.size > 0) return usage();
        const status = await managerStatus(place, io.env);
        out(`service     ${status.installed ? `installed: ${place.definition}` : `not installed (${describeManager(place)})`}`);
        for (const line of status.detail.filter(Boolean)) out(`            ${line}`);
        if (place.logFile) out(`log         ${place.logFile}`);
        await showStatus(config, io, false);
        return !status.installed ? 4 : status.state === "active" ? 0 : 3;
      }
      case "logs": {
        const at = rest.indexOf("-n");
        const lines = at >= 0 ? Number(rest[at + 1]) : 100;
        if (!Number.isInteger(lines) || lines < 1 || [...flags].some((flag) => flag !== "-n" && flag !== "-f")) return usage();
        return await showLogs(place, serviceIo, { lines, follow: flags.has("-f") });
      }
      default:
        return usage();
    }
  } catch (error) {
    io.stderr(`tether-host: ${(error as Error).message}\n`);
    return 1;
  }
}
