import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const AUTOCANNON_BIN = path.join(path.dirname(require.resolve("autocannon/package.json")), "autocannon.js");

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  /** Connection errors and timeouts. */
  errors: number;
}

/**
 * Drives `url` with autocannon in a separate process, so the load generator does not share the
 * server's event loop, and returns mean requests/s and latency percentiles.
 */
export interface LoadOptions {
  headers?: Record<string, string>;
  seconds?: number;
  connections?: number;
  /** POSTed as JSON when given. */
  json?: unknown;
}

export async function load(url: string, options: LoadOptions = {}): Promise<LoadResult> {
  const args = [AUTOCANNON_BIN, "--json", "-c", String(options.connections ?? 10), "-d", String(options.seconds ?? 5)];
  if (options.json !== undefined) args.push("-m", "POST", "-b", JSON.stringify(options.json), "-H", "content-type=application/json");
  for (const [name, value] of Object.entries(options.headers ?? {})) args.push("-H", `${name}=${value}`);
  args.push(url);
  const { stdout } = await run(process.execPath, args, { maxBuffer: 16 * 1024 * 1024 });
  const result = JSON.parse(stdout) as {
    requests: { average: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
  };
  return { requestsPerSecond: result.requests.average, p50Ms: result.latency.p50, p99Ms: result.latency.p99, non2xx: result.non2xx, errors: result.errors };
}

export const ratio = (value: number, baseline: number) => (baseline > 0 ? value / baseline : 0);
export const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** p50, p99 and rate of timed samples (ms or us, as given) taken over `seconds`. */
export function percentiles(samples: number[], seconds: number): { p50: number; p99: number; perSecond: number } {
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] ?? 0;
  return { p50: at(0.5), p99: at(0.99), perSecond: samples.length / seconds };
}
