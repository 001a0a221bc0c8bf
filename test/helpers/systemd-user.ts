import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import type { Test } from "tap";
import { eventually } from "./eventually.js";

/**
 * A real `systemd --user` (Debian's systemd, with its own journald) for tests, on a machine not booted with
 * systemd: as root, in a private mount namespace where /run/systemd/system exists (the manager's only check)
 * and journald's directories are fresh tmpfs mounts, so nothing outside the namespace changes. Commands run
 * inside it through `nsenter`. Undefined and a reason when this machine cannot (not root, no unshare, …).
 */
export interface UserSystemd {
  /** Runs `argv` in the namespace with `env` (XDG_RUNTIME_DIR set: systemctl --user finds the manager there). */
  run(argv: readonly string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }>;
}

const PROGRAMS = ["/usr/bin/unshare", "/usr/bin/nsenter", "/lib/systemd/systemd", "/lib/systemd/systemd-journald", "/usr/bin/systemctl", "/usr/bin/journalctl"];

const SETUP = `set -e
mount -t tmpfs tmpfs /run/systemd
mkdir -p /run/systemd/system
mkdir -p /run/log
mount -t tmpfs tmpfs /run/log
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi
/lib/systemd/systemd-journald </dev/null >/dev/null 2>&1 &
echo "journald $!"
exec /lib/systemd/systemd --user --log-target=console
`;

function collect(child: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  return new Promise((resolve) => {
    child.on("error", (error) => resolve({ code: 127, stdout, stderr: stderr + error.message }));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

export async function startUserSystemd(t: Test, env: Record<string, string>): Promise<UserSystemd | string> {
  if (process.platform !== "linux") return "not Linux";
  if (process.getuid?.() !== 0) return "a private mount namespace needs root";
  const missing = PROGRAMS.filter((program) => !existsSync(program));
  if (missing.length > 0) return `missing ${missing.join(", ")}`;
  const manager = spawn("/usr/bin/unshare", ["--mount", "--propagation", "private", "--", "/bin/bash", "-c", SETUP], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let journald: number | undefined;
  let output = "";
  manager.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
    journald ??= Number(/journald (\d+)/.exec(output)?.[1]) || undefined;
  });
  manager.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<void>((resolve) => manager.on("exit", () => resolve()));
  t.teardown(async () => {
    // The manager stops its units (the tether-host service among them) when it is told to exit.
    if (manager.exitCode === null && manager.signalCode === null) {
      manager.kill("SIGTERM");
      await eventually(() => manager.exitCode !== null || manager.signalCode !== null, 20_000, "systemd --user exits").catch(() => manager.kill("SIGKILL"));
    }
    if (journald) {
      try {
        process.kill(journald, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
    await exited;
  });
  const run: UserSystemd["run"] = (argv, runEnv) =>
    collect(spawn("/usr/bin/nsenter", [`--mount=/proc/${manager.pid}/ns/mnt`, "--", ...argv], { env: runEnv, stdio: ["ignore", "pipe", "pipe"] }));
  try {
    await eventually(
      async () => {
        if (manager.exitCode !== null) throw new Error(`systemd --user exited: ${output.trim().split("\n").slice(-3).join(" | ")}`);
        const state = await run(["/usr/bin/systemctl", "--user", "is-system-running"], env);
        return /^(running|degraded)/.test(state.stdout);
      },
      20_000,
      () => `systemd --user to run (${output.trim().split("\n").slice(-3).join(" | ")})`,
    );
  } catch (error) {
    return `systemd --user did not start here: ${(error as Error).message}`;
  }
  return { run };
}
