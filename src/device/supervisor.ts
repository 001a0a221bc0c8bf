import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { UPDATED_EXIT_CODE } from "../protocol/index.js";
import { ExitCode } from "./exit-code.js";
import { RotatingLog } from "./log-file.js";
import { hostCommand } from "./service-platform.js";
import { backoffDelay, seconds, sleep } from "./sleep.js";

/** Exits after which starting the host again cannot help: a bad setting, pair again, another host took over. */
const FINAL = new Set<number>([ExitCode.config, ExitCode.pairAgain, ExitCode.replaced]);
/** A run this long starts the backoff over. */
const HEALTHY_RUN_MS = 10 * 60_000;

type Env = Record<string, string | undefined>;

/**
 * `tether-host service run --config-dir <dir>`: what the Windows scheduled task starts (Task Scheduler restarts
 * a task only when it fails to launch, and keeps no log). It runs `tether-host run` as a child with the
 * environment `service install` saved in `<dir>/service.json`, writes the child's output to the rotated log
 * file, and starts it again when it ends: at once after an update (exit 10, so the new executable runs),
 * after 1 s, 2 s, … up to 5 min after a failure, never after a final exit (2, 3, 4). It works anywhere a
 * service manager is missing.
 */
export async function superviseHost(args: { configDir: string; env: Env; stderr: (text: string) => void; signal?: AbortSignal }): Promise<number> {
  const settingsFile = path.join(args.configDir, "service.json");
  let settings: { env?: Record<string, string>; logFile?: string } = {};
  try {
    settings = JSON.parse(await readFile(settingsFile, "utf8")) as typeof settings;
  } catch {
    /* run with the current environment */
  }
  const logFile = settings.logFile ? new RotatingLog(settings.logFile) : undefined;
  const log = (line: string) => (logFile ? logFile.write(line) : args.stderr(`${line}\n`));
  const env: Env = { ...args.env, ...settings.env, TETHER_CONFIG_DIR: args.configDir, TETHER_SERVICE: settings.env?.TETHER_SERVICE ?? "supervisor" };
  delete env.TETHER_LOG_FILE;

  const stop = new AbortController();
  args.signal?.addEventListener("abort", () => stop.abort(), { once: true });
  let child: ReturnType<typeof spawn> | undefined;
  const onSignal = () => {
    log("tether-host service run: stopping");
    stop.abort();
    child?.kill("SIGTERM");
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    let attempt = 0;
    for (;;) {
      const [program, ...prefix] = hostCommand();
      const started = Date.now();
      child = spawn(program!, [...prefix, "run"], { env: env, stdio: ["ignore", "pipe", "pipe"], windowsHide: true });
      const relay = (chunk: string) => chunk.split(/\r?\n/).filter(Boolean).forEach(log);
      child.stdout!.setEncoding("utf8").on("data", relay);
      child.stderr!.setEncoding("utf8").on("data", relay);
      const code = await new Promise<number>((resolve) => {
        child!.on("error", (error) => {
          log(`tether-host service run: cannot start ${program}: ${error.message}`);
          resolve(ExitCode.failed);
        });
        child!.on("exit", (exitCode, signal) => resolve(exitCode ?? (signal ? 128 : 1)));
      });
      if (stop.signal.aborted) return ExitCode.stopped;
      if (FINAL.has(code)) {
        log(`tether-host service run: the host exited with ${code}; not starting it again (see the lines above)`);
        return code;
      }
      if (Date.now() - started > HEALTHY_RUN_MS) attempt = 0;
      const delay = code === UPDATED_EXIT_CODE ? 0 : backoffDelay(attempt++, { initialMs: 1_000, maxMs: 300_000 });
      log(`tether-host service run: the host exited with ${code}${code === UPDATED_EXIT_CODE ? " (updated)" : ""}; starting it again in ${seconds(delay)}`);
      if (!(await sleep(delay, stop.signal))) return ExitCode.stopped;
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
