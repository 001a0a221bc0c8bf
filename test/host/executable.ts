import { spawn, type ChildProcess } from "node:child_process";
import type { Test } from "tap";
import { buildHost, HostPrerequisiteMissing, type HostTarget } from "../../scripts/build-host.js";
import { IN_CI } from "../helpers/database.js";
import { eventually } from "../helpers/eventually.js";

/**
 * The real device executable built from bin/host.ts (reused when newer than its sources; always
 * built when `node` names the Node binary to embed). A build that was attempted and failed fails the
 * calling test file, here as in CI: a test that cannot run its subject says so loudly. Only a
 * prerequisite missing on this machine that cannot be fetched (a foreign target's Node runtime,
 * offline) skips the file outside CI, with the reason printed.
 */
export async function builtExecutable(t: Test, target?: HostTarget, options: { node?: string } = {}): Promise<string> {
  try {
    return (await buildHost({ ifStale: options.node === undefined, ...(target ? { target } : {}), ...options, log: (line) => t.comment(line) })).executable;
  } catch (error) {
    if (!(error instanceof HostPrerequisiteMissing) || IN_CI) {
      throw new Error(`the device executable${target ? ` for ${target}` : ""} could not be built, so this file cannot test it: ${(error as Error).message}`, {
        cause: error,
      });
    }
    t.plan(0, `skip: ${error.message}`);
    process.exit(0);
  }
}

export interface HostProcess {
  child: ChildProcess;
  stderr: string[];
  exited: Promise<number | null>;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
}

/** Runs the executable as a separate process with a clean environment (only what the device needs). */
export function startHost(executable: string, env: Record<string, string>, cwd: string): HostProcess {
  const child = spawn(executable, [], {
    cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cwd, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stderr: string[] = [];
  let buffer = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    buffer += chunk;
    const lines = buffer.split("\n");
    buffer = lines.pop()!;
    stderr.push(...lines);
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return {
    child,
    stderr,
    exited,
    async waitFor(pattern, timeoutMs = 20_000) {
      let found: string | undefined;
      await eventually(
        () => (found = stderr.find((line) => pattern.test(line))) !== undefined,
        timeoutMs,
        () => `a line matching ${pattern} (got: ${[...stderr, buffer].join(" | ")})`,
      );
      return found!;
    },
  };
}

/** What tether-host prints when it asks for approval: the URL with the code filled in, and the code on its own line. */
export async function approvalPrompt(host: HostProcess): Promise<{ url: string; userCode: string }> {
  const urlLine = await host.waitFor(/^\s+https?:\/\/\S+\/device\?user_code=/);
  const userCode = await host.waitFor(/^[A-Z0-9]{4}-[A-Z0-9]{4}$/);
  return { url: urlLine.trim(), userCode };
}
