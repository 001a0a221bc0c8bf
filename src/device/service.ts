import { spawn } from "node:child_process";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import type { HostEnvironment } from "./config.js";
import { launchdPlist, SERVICE_NAME, SYSTEMD_UNIT, systemdUnit, utf16le, windowsTask } from "./service-definitions.js";
import { launchdService, launchdTarget, runTool, serviceSpec, systemdVersion, windowsUser, type CommandResult, type ServicePlace } from "./service-platform.js";

/**
 * `tether-host service install | uninstall | status | logs`, for the platform's service manager (see
 * service-definitions.ts). Every command may be repeated: install rewrites the definition only when it
 * changed and (re)starts the service only when needed; uninstall of nothing says so and succeeds.
 */
export interface ServiceIo {
  out: (line: string) => void;
  env: Record<string, string | undefined>;
}

type Env = Record<string, string | undefined>;

async function readText(file: string): Promise<string | undefined> {
  return readFile(file).then(
    (buffer) => buffer.toString(buffer[0] === 0xff && buffer[1] === 0xfe ? "utf16le" : "utf8"),
    () => undefined,
  );
}

async function writeAtomically(file: string, content: string | Buffer): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, content, { mode: 0o644 });
  await rename(temporary, file);
}

const fail = (what: string, result: CommandResult) =>
  new Error(`${what} failed (exit ${result.code}): ${result.stderr || result.stdout.trim() || "no output"}`);

/** The definition's bytes for this platform and config. */
async function definitionFor(place: ServicePlace, config: HostEnvironment, env: Env): Promise<{ text: string; bytes: string | Buffer }> {
  const spec = serviceSpec(place, config, env);
  if (place.manager === "systemd") {
    const text = systemdUnit(spec, { restartSteps: ((await systemdVersion(env)) ?? 0) >= 254 });
    return { text, bytes: text };
  }
  if (place.manager === "launchd") {
    const text = launchdPlist(spec, path.dirname(place.logFile!));
    return { text, bytes: text };
  }
  const text = windowsTask(spec, windowsUser(env));
  return { text, bytes: utf16le(text) };
}

/**
 * Writes the definition (when it changed) and, unless `filesOnly`, has the manager enable and start it,
 * restarting a running service whose definition changed. Returns the exit code.
 */
export async function installService(place: ServicePlace, config: HostEnvironment, io: ServiceIo, options: { filesOnly: boolean }): Promise<number> {
  const { text, bytes } = await definitionFor(place, config, io.env);
  const previous = await readText(place.definition);
  const changed = previous?.replace(/\r\n/g, "\n").replace(/^\uFEFF/, "") !== text;
  if (changed) await writeAtomically(place.definition, bytes);
  if (place.manager === "task") {
    // Tasks carry no environment: `service run` applies this.
    await writeAtomically(place.settings, `${JSON.stringify({ env: serviceSpec(place, config, io.env).env, logFile: place.logFile }, null, 2)}\n`);
  }
  io.out(`${changed ? (previous === undefined ? "wrote" : "updated") : "unchanged"}: ${place.definition}`);
  if (options.filesOnly) {
    io.out(`not started (--files-only); the ${describeManager(place)} starts it once enabled`);
    return 0;
  }
  const env = io.env;
  if (place.manager === "systemd") {
    for (const args of [["daemon-reload"], ["enable", SYSTEMD_UNIT]]) {
      const result = await runTool("systemctl", ["--user", ...args], env);
      if (result.code !== 0) throw fail(`systemctl --user ${args.join(" ")}`, result);
    }
    const active = (await runTool("systemctl", ["--user", "is-active", SYSTEMD_UNIT], env)).stdout.trim() === "active";
    if (changed || !active) {
      const result = await runTool("systemctl", ["--user", active ? "restart" : "start", SYSTEMD_UNIT], env);
      if (result.code !== 0) throw fail(`systemctl --user start ${SYSTEMD_UNIT}`, result);
      io.out(
        `${active ? "restarted" : "started"}: ${SYSTEMD_UNIT} (systemd user unit, enabled at login; \`loginctl enable-linger $USER\` starts it at boot without a login)`,
      );
    } else {
      io.out(`already running: ${SYSTEMD_UNIT}`);
    }
    return 0;
  }
  if (place.manager === "launchd") {
    const loaded = (await runTool("launchctl", ["print", launchdService()], env)).code === 0;
    if (loaded && !changed) {
      io.out(`already loaded: ${launchdService()}`);
      return 0;
    }
    if (loaded) await runTool("launchctl", ["bootout", launchdService()], env);
    const result = await runTool("launchctl", ["bootstrap", launchdTarget(), place.definition], env);
    if (result.code !== 0) throw fail("launchctl bootstrap", result);
    await runTool("launchctl", ["enable", launchdService()], env);
    io.out(`${loaded ? "reloaded" : "loaded"}: ${launchdService()} (starts at login; log ${place.logFile})`);
    return 0;
  }
  const created = await runTool("schtasks", ["/Create", "/TN", SERVICE_NAME, "/XML", place.definition, "/F"], env);
  if (created.code !== 0) throw fail("schtasks /Create", created);
  if (changed) await runTool("schtasks", ["/End", "/TN", SERVICE_NAME], env);
  const started = await runTool("schtasks", ["/Run", "/TN", SERVICE_NAME], env);
  if (started.code !== 0) throw fail("schtasks /Run", started);
  io.out(`registered and started: scheduled task ${SERVICE_NAME} (at logon; log ${place.logFile})`);
  return 0;
}

/** Stops and removes the service; nothing installed is not an error. */
export async function uninstallService(place: ServicePlace, io: ServiceIo, options: { filesOnly: boolean }): Promise<number> {
  const existed = (await readText(place.definition)) !== undefined;
  const env = io.env;
  if (!options.filesOnly) {
    if (place.manager === "systemd") {
      if (existed) {
        const result = await runTool("systemctl", ["--user", "disable", "--now", SYSTEMD_UNIT], env);
        if (result.code !== 0 && !/not loaded|does not exist|not found/i.test(result.stderr))
          throw fail(`systemctl --user disable --now ${SYSTEMD_UNIT}`, result);
      }
    } else if (place.manager === "launchd") {
      await runTool("launchctl", ["bootout", launchdService()], env);
    } else {
      await runTool("schtasks", ["/End", "/TN", SERVICE_NAME], env);
      await runTool("schtasks", ["/Delete", "/TN", SERVICE_NAME, "/F"], env);
    }
  }
  await rm(place.definition, { force: true });
  if (place.manager === "task") await rm(place.settings, { force: true });
  if (!options.filesOnly && place.manager === "systemd" && existed) await runTool("systemctl", ["--user", "daemon-reload"], env);
  io.out(existed ? `removed: ${place.definition}` : `not installed: ${place.definition} does not exist`);
  return 0;
}

export interface ManagerStatus {
  installed: boolean;
  /** `active`, `inactive`, `failed`, `activating`…, or undefined when the manager cannot be asked. */
  state: string | undefined;
  detail: string[];
}

/** What the service manager says about the service. */
export async function managerStatus(place: ServicePlace, env: Env): Promise<ManagerStatus> {
  const installed = (await readText(place.definition)) !== undefined;
  if (place.manager === "systemd") {
    const shown = await runTool(
      "systemctl",
      ["--user", "show", SYSTEMD_UNIT, "-p", "ActiveState,SubState,UnitFileState,MainPID,NRestarts,ExecMainStartTimestamp,Result"],
      env,
    );
    if (shown.code !== 0) return { installed, state: undefined, detail: [`systemctl --user cannot be asked: ${shown.stderr || `exit ${shown.code}`}`] };
    const props = Object.fromEntries(
      shown.stdout
        .trim()
        .split("\n")
        .map((line) => line.split(/=(.*)/s, 2) as [string, string]),
    );
    return {
      installed,
      state: props.ActiveState,
      detail: [
        `systemd: ${props.ActiveState} (${props.SubState}), ${props.UnitFileState || "not enabled"}, main pid ${props.MainPID}, ${props.NRestarts ?? 0} restarts${props.ExecMainStartTimestamp ? `, started ${props.ExecMainStartTimestamp}` : ""}`,
      ],
    };
  }
  if (place.manager === "launchd") {
    const printed = await runTool("launchctl", ["print", launchdService()], env);
    if (printed.code !== 0) return { installed, state: installed ? "inactive" : undefined, detail: [installed ? "launchd: not loaded" : ""] };
    const state = /\bstate = (\w+)/.exec(printed.stdout)?.[1];
    return { installed, state: state === "running" ? "active" : state, detail: [`launchd: ${state ?? "loaded"}`] };
  }
  const queried = await runTool("schtasks", ["/Query", "/TN", SERVICE_NAME, "/FO", "LIST", "/V"], env);
  if (queried.code !== 0) return { installed, state: installed ? "inactive" : undefined, detail: [installed ? "Task Scheduler: not registered" : ""] };
  const status = /^Status:\s*(.+)$/m.exec(queried.stdout)?.[1]?.trim();
  return { installed, state: status === "Running" ? "active" : "inactive", detail: [`Task Scheduler: ${status ?? "registered"}`] };
}

/** After `tether-host update` from a shell: restart the installed service, if it runs, so it runs the new executable. */
export async function restartRunningService(place: ServicePlace, env: Env): Promise<string | undefined> {
  const status = await managerStatus(place, env);
  if (!status.installed || status.state !== "active") return undefined;
  const result =
    place.manager === "systemd"
      ? await runTool("systemctl", ["--user", "try-restart", SYSTEMD_UNIT], env)
      : place.manager === "launchd"
        ? await runTool("launchctl", ["kickstart", "-k", launchdService()], env)
        : await runTool("schtasks", ["/End", "/TN", SERVICE_NAME], env).then(() => runTool("schtasks", ["/Run", "/TN", SERVICE_NAME], env));
  return result.code === 0
    ? `restarted the ${describeManager(place)} to run it`
    : `could not restart the ${describeManager(place)}: ${result.stderr || `exit ${result.code}`}`;
}

/** `tether-host service logs [-n N] [-f]`: journald's, or the rotated file's last lines. */
export async function showLogs(place: ServicePlace, io: ServiceIo, options: { lines: number; follow: boolean }): Promise<number> {
  if (place.manager === "systemd") {
    // A user manager outside user@.service (a container, a namespace) has its units journaled as system units: ask for both.
    const args = [
      `--user-unit=${SYSTEMD_UNIT}`,
      `--unit=${SYSTEMD_UNIT}`,
      "-n",
      String(options.lines),
      "--no-pager",
      "-o",
      "short-iso",
      ...(options.follow ? ["-f"] : []),
    ];
    return new Promise((resolve) => {
      const child = spawn("journalctl", args, { env: io.env, stdio: ["ignore", "pipe", "pipe"] });
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => io.out(chunk.replace(/\n$/, "")));
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => io.out(chunk.replace(/\n$/, "")));
      child.on("error", () => {
        io.out("journalctl is not installed: the log is in the journal of the user's systemd");
        resolve(1);
      });
      child.on("close", (code) => resolve(code ?? 1));
    });
  }
  const file = place.logFile!;
  const text = await readFile(file, "utf8").catch(() => undefined);
  if (text === undefined) {
    io.out(`no log yet: ${file}`);
    return 0;
  }
  const lines = text.split("\n").filter(Boolean);
  io.out(lines.slice(-options.lines).join("\n"));
  if (options.follow) io.out(`(following a file is left to the platform: tail -f "${file}" or Get-Content -Wait)`);
  return 0;
}

export function describeManager(place: ServicePlace): string {
  return place.manager === "systemd" ? `systemd user unit ${SYSTEMD_UNIT}` : place.manager === "launchd" ? `launchd agent` : `scheduled task ${SERVICE_NAME}`;
}
