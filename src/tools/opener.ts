/** The operating system's "open" and "reveal" commands, started without a shell. */
import { spawn } from "node:child_process";
import path from "node:path";
import type { OpenerCommands } from "./define.js";
import { ToolError } from "./errors.js";
import { findExecutable } from "./process.js";
import { isList } from "./validate.js";

export function defaultOpener(platform: NodeJS.Platform = process.platform): OpenerCommands {
  if (platform === "darwin") return { open: ["open"], reveal: ["open", "-R"] };
  // explorer takes "/select,<path>" as one switch; a separate argument after the comma is accepted too.
  if (platform === "win32") return { open: ["explorer"], reveal: ["explorer", "/select,"] };
  return { open: ["xdg-open"], reveal: ["xdg-open"], revealOpensParent: true };
}

/** How long to wait for the opener to report failure; GUI openers often keep running, which is success. */
const OPENER_WAIT_MS = 5000;

export interface OpenerOutcome {
  command: string[];
  exitCode: number | null;
  stillRunning: boolean;
}

export async function launchOpener(argv: readonly string[] | undefined, target: string, signal?: AbortSignal): Promise<OpenerOutcome> {
  if (!isList(argv) || argv.length === 0 || argv.some((a) => typeof a !== "string" || a.includes("\0"))) {
    throw new ToolError("OPENER_NOT_FOUND", "No opener command is configured for this platform");
  }
  const [program, ...programArgs] = argv as readonly [string, ...string[]];
  const executable = findExecutable(program);
  if (!executable) {
    throw new ToolError("OPENER_NOT_FOUND", `The opener ${JSON.stringify(program)} was not found on this device (is a desktop session installed?)`, {
      command: program,
    });
  }
  const args = [...programArgs, target];
  const command = [executable, ...args];
  return new Promise<OpenerOutcome>((resolve, reject) => {
    const child = spawn(executable, args, { shell: false, detached: true, stdio: ["ignore", "ignore", "pipe"], windowsHide: false });
    let stderr = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      if (stderr.length < 2000) stderr += chunk.slice(0, 2000 - stderr.length);
    });
    const timer = setTimeout(() => {
      child.stderr.destroy();
      child.unref();
      resolve({ command, exitCode: null, stillRunning: true });
    }, OPENER_WAIT_MS);
    const onAbort = () => {
      clearTimeout(timer);
      child.unref();
      reject(new ToolError("ABORTED", "The tool call was cancelled"));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    child.on("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      const code = error.code === "ENOENT" || error.code === "EACCES" ? "OPENER_NOT_FOUND" : "OPENER_FAILED";
      reject(new ToolError(code, `Could not start ${path.basename(executable)}: ${error.message}`, { command: executable }));
    });
    child.on("close", (exitCode) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      // explorer.exe exits 1 even when it worked.
      if (exitCode === 0 || process.platform === "win32") return resolve({ command, exitCode, stillRunning: false });
      reject(
        new ToolError("OPENER_FAILED", `${path.basename(executable)} exited with status ${exitCode}${stderr ? `: ${stderr.trim()}` : ""}`, {
          command,
          exitCode,
          stderr,
        }),
      );
    });
  });
}
