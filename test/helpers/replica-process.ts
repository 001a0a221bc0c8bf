import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Replicas as production runs them, for the cluster tests and the bench alike: `src/server.ts` in a
 * process of its own. No tap here, so the bench can use it; whoever spawns a replica ends it by PID.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** A port nothing listens on right now (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

export interface ReplicaProcessOptions {
  port: number;
  databaseUrl: string;
  redisUrl: string;
  /** `BETTER_AUTH_URL`: the public address, the same on every replica. */
  publicUrl: string;
  secret: string;
  /** More of the replica's environment (log level, limits, proxy trust). */
  env?: Record<string, string>;
}

/** Starts one replica on 127.0.0.1:`port`; its output is piped (stdout and stderr). */
export function spawnReplica(options: ReplicaProcessOptions): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", "src/server.ts"], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      PORT: String(options.port),
      HOST: "127.0.0.1",
      DATABASE_URL: options.databaseUrl,
      REDIS_URL: options.redisUrl,
      BETTER_AUTH_SECRET: options.secret,
      BETTER_AUTH_URL: options.publicUrl,
      // No background tether-host build in a test (host-build.ts): a test that wants one says so.
      HOST_BUILD_ON_START: "false",
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
}
