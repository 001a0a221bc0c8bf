/**
 * Starting external programs: a fixed executable and an argv array, never a shell. The executable is looked up
 * on PATH by us, skipping empty and relative PATH entries, so a program planted in the working directory (which
 * is a root the model can write to) is never picked up; Windows' CreateProcess would otherwise search it first.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ToolError } from "./errors.js";

/** Absolute path of an executable, or undefined. `command` is a bare name or an absolute path. */
export function findExecutable(command: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const isWin = process.platform === "win32";
  const usable = (candidate: string): boolean => {
    try {
      if (!fs.statSync(candidate).isFile()) return false;
      if (!isWin) fs.accessSync(candidate, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  // Batch files need cmd.exe, and cmd.exe re-parses arguments: they are never run.
  const refusedScript = (candidate: string) => isWin && /\.(bat|cmd)$/i.test(candidate);
  if (path.isAbsolute(command)) return usable(command) && !refusedScript(command) ? command : undefined;
  if (command.includes("/") || command.includes("\\")) return undefined;
  const extensions = isWin ? ["", ...(env.PATHEXT ?? ".COM;.EXE").split(";").filter((e) => e && !/^\.(bat|cmd)$/i.test(e))] : [""];
  for (const dir of (env.PATH ?? env.Path ?? "").split(path.delimiter)) {
    if (!dir || !path.isAbsolute(dir)) continue;
    for (const ext of extensions) {
      const candidate = path.join(dir, command + ext);
      if (usable(candidate) && !refusedScript(candidate)) return candidate;
    }
  }
  return undefined;
}

export interface RunProcessOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs: number;
  maxOutputBytes: number;
  signal?: AbortSignal;
}

export interface ProcessOutput {
  exitCode: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
  stdoutOmittedBytes: number;
  stderrOmittedBytes: number;
  durationMs: number;
}

/** Runs to completion, keeping at most `maxOutputBytes` of each stream (the rest is drained and counted). */
export function runProcess(file: string, args: readonly string[], opts: RunProcessOptions): Promise<ProcessOutput> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    // Its own process group on POSIX, so a kill reaches the program's children too (a shell script's `sleep`
    // would otherwise keep the pipes, and the call, open).
    const group = process.platform !== "win32";
    const child = spawn(file, args, { cwd: opts.cwd, env: opts.env, shell: false, windowsHide: true, detached: group, stdio: ["ignore", "pipe", "pipe"] });
    const collect = () => {
      const state = { chunks: [] as Buffer[], kept: 0, omitted: 0 };
      return {
        state,
        onData: (chunk: Buffer) => {
          const room = opts.maxOutputBytes - state.kept;
          if (room > 0) state.chunks.push(chunk.subarray(0, room));
          state.kept += Math.min(room > 0 ? room : 0, chunk.length);
          state.omitted += Math.max(0, chunk.length - Math.max(room, 0));
        },
      };
    };
    const out = collect();
    const err = collect();
    child.stdout.on("data", out.onData);
    child.stderr.on("data", err.onData);
    let failure: ToolError | undefined;
    const kill = (why: ToolError) => {
      failure ??= why;
      try {
        if (group && child.pid) process.kill(-child.pid, "SIGKILL");
        else child.kill("SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    };
    const timer = setTimeout(
      () => kill(new ToolError("TIMEOUT", `The command did not finish within ${opts.timeoutMs} ms and was killed`, { timeoutMs: opts.timeoutMs })),
      opts.timeoutMs,
    );
    const onAbort = () => kill(new ToolError("ABORTED", "The tool call was cancelled; the command was killed"));
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    if (opts.signal?.aborted) onAbort();
    const cleanup = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
    };
    child.on("error", (error) => {
      cleanup();
      reject(error);
    });
    child.on("exit", () => {
      if (!failure) return;
      // Killed: do not wait for pipes a stray grandchild might still hold.
      cleanup();
      child.stdout.destroy();
      child.stderr.destroy();
      reject(failure);
    });
    child.on("close", (code, signal) => {
      cleanup();
      if (failure) return reject(failure);
      resolve({
        exitCode: code,
        signal,
        stdout: Buffer.concat(out.state.chunks),
        stderr: Buffer.concat(err.state.chunks),
        stdoutOmittedBytes: out.state.omitted,
        stderrOmittedBytes: err.state.omitted,
        durationMs: Date.now() - started,
      });
    });
  });
}
