/**
 * A replica's stream leases in a process of their own, so a test can crash it (SIGKILL by its PID) and
 * watch the leases drain from Redis: `node --import tsx test/helpers/stream-holder.ts <redis url> <key
 * prefix> <user id> <count> <lease ms>` takes `count` leases of one user's MCP streams (each with a
 * credential of its own), prints `held <n>`, and renews them until it is killed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import type { Test } from "tap";
import { createStreamAccounting } from "../../src/http/stream-leases.js";

const HERE = fileURLToPath(import.meta.url);

export interface StreamHolder {
  child: ChildProcess;
  /** Resolves once the leases are held. */
  held: Promise<void>;
}

/** Starts the holder; it is killed by PID at the end of `t`, even on failure. */
export function holdStreams(t: Test, args: { redisUrl: string; prefix: string; userId: string; count: number; leaseMs: number }): StreamHolder {
  const child = spawn(process.execPath, ["--import", "tsx", HERE, args.redisUrl, args.prefix, args.userId, String(args.count), String(args.leaseMs)], {
    cwd: path.resolve(path.dirname(HERE), "../.."),
    stdio: ["ignore", "pipe", "inherit"],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const held = new Promise<void>((resolve, reject) => {
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
      if (output.includes(`held ${args.count}`)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`the stream holder exited (${code}) before holding its leases: ${output}`)));
  });
  return { child, held };
}

if (process.argv[1] && path.resolve(process.argv[1]) === HERE) {
  const [redisUrl, prefix, userId, count, leaseMs] = process.argv.slice(2) as [string, string, string, string, string];
  const redis = new Redis(redisUrl);
  const accounting = createStreamAccounting({ perUser: 0, perCredential: 0, capacity: () => Infinity, redis, prefix, leaseMs: Number(leaseMs) });
  let held = 0;
  for (let i = 0; i < Number(count); i++) {
    const lease = await accounting.acquire({ kind: "mcp", userId, credential: `token:holder-${process.pid}-${i}` });
    if (typeof lease !== "string") held++;
  }
  process.stdout.write(`held ${held}\n`);
  // Renewing until killed; the interval keeps the process alive.
  setInterval(() => {}, 1 << 30);
}
