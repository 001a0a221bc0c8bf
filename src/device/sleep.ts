/** Waits `ms`, or less if `signal` aborts; true when it waited the whole time. */
export function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export interface Backoff {
  initialMs: number;
  maxMs: number;
}

/** Delay before attempt `n` (0-based): exponential, capped, with "equal jitter" (half fixed, half random). */
export function backoffDelay(attempt: number, backoff: Backoff, random = Math.random): number {
  const ceiling = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
