import { spawn, type ChildProcess } from "node:child_process";
import { Redis } from "ioredis";
import type { Test } from "tap";
import { freePort } from "./app.js";
import { eventually } from "./eventually.js";

export interface OwnRedis {
  url: string;
  port: number;
  /** Stops the server (the `stopSignal`, awaited): clients see Redis go away. */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
}

export interface OwnRedisOptions {
  /** How `stop` ends it: SIGTERM (default) is an orderly shutdown; SIGKILL is as abrupt as a crash. */
  stopSignal?: "SIGTERM" | "SIGKILL";
}

/**
 * A Redis server of the test's own (`redis-server` on a free port, no persistence), so a test can stop
 * and restart it without touching the shared one. Ended by its PID in `t.teardown`, even on failure.
 */
export async function startOwnRedis(t: Test, options: OwnRedisOptions = {}): Promise<OwnRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;

  const start = async () => {
    const started = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
    child = started;
    const exited = new Promise<never>((_, reject) => started.once("exit", () => reject(new Error(`redis-server on port ${port} exited while starting`))));
    exited.catch(() => {});
    const answers = async () => {
      const probe = new Redis(port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on("error", () => {});
      try {
        await probe.connect();
        return (await probe.ping()) === "PONG";
      } finally {
        probe.disconnect();
      }
    };
    await Promise.race([eventually(answers, 15_000, `redis-server on port ${port} to start`, 50), exited]);
  };

  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill(options.stopSignal ?? "SIGTERM");
    await exited;
  };

  await start();
  t.teardown(async () => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
  });
  return { url: `redis://127.0.0.1:${port}`, port, stop, start };
}
