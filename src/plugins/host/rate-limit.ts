/**
 * A fixed-window counter per key (the client address, for enrollment), in this process's memory:
 * like the dispatcher it assumes one replica, and a restart forgets the counts. Keys are swept when
 * their window ends, so memory is bounded by the addresses seen in one window.
 */
export interface RateLimiter {
  /** Counts one hit; returns 0 when allowed, else the seconds until the window resets. */
  hit(key: string): number;
  /** Takes back one hit (e.g. the attempt succeeded, so only failures count). */
  refund(key: string): void;
}

export function createRateLimiter(options: { max: number; windowMs: number; now?: () => number }): RateLimiter {
  const now = options.now ?? Date.now;
  const windows = new Map<string, { start: number; count: number }>();
  let lastSweep = now();

  return {
    hit(key) {
      const t = now();
      if (t - lastSweep > options.windowMs) {
        for (const [k, w] of windows) if (t - w.start >= options.windowMs) windows.delete(k);
        lastSweep = t;
      }
      let window = windows.get(key);
      if (!window || t - window.start >= options.windowMs) {
        window = { start: t, count: 0 };
        windows.set(key, window);
      }
      window.count += 1;
      if (window.count <= options.max) return 0;
      return Math.max(1, Math.ceil((window.start + options.windowMs - t) / 1000));
    },
    refund(key) {
      const window = windows.get(key);
      if (window && window.count > 0) window.count -= 1;
    },
  };
}
