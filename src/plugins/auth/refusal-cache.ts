/**
 * better-auth refuses a rate-limited request only after building its whole router again (every
 * `auth.handler` call rebuilds the endpoint table and a fresh router, better-auth issue #10188: about
 * 2 ms of this process's one thread per request here). So a client flooding the auth API past its limit
 * made every refusal cost as much as a real request, and slowed everyone else.
 *
 * This remembers better-auth's own rate-limit refusals, by client address and path (the key better-auth
 * counts by), for as long as better-auth said (`X-Retry-After`), less one second: within that time better-auth
 * would refuse the same key again (a refused request does not move its window), so the bridge answers the
 * same 429 itself, without calling better-auth. The last second is left to better-auth, whose figure is
 * rounded up, so nothing it would allow is ever refused here. Other 429s (the sign-in lockout, per account)
 * are not remembered.
 */

/** The body of better-auth's rate-limit refusal (better-auth/dist/api/rate-limiter), the one 429 remembered. */
const RATE_LIMITED_BODY = JSON.stringify({ message: "Too many requests. Please try again later." });

export interface RefusalCache {
  /** better-auth's refusal for `key`, answered again while it holds; undefined when the request must go to better-auth. */
  answer(key: string): Response | undefined;
  /** Remembers `response` for `key` if it is better-auth's rate-limit refusal. */
  remember(key: string, response: Response): Promise<void>;
  readonly size: number;
}

export function createRefusalCache(options: { maxEntries?: number; now?: () => number } = {}): RefusalCache {
  const maxEntries = options.maxEntries ?? 10_000;
  const now = options.now ?? Date.now;
  /** Key → when better-auth's refusal stops being certain (ms). */
  const until = new Map<string, number>();

  const sweep = () => {
    const at = now();
    for (const [key, end] of until) if (end <= at) until.delete(key);
    // Still full of live refusals (a flood from very many addresses): forget the oldest; better-auth decides for them.
    for (const key of until.keys()) {
      if (until.size < maxEntries) break;
      until.delete(key);
    }
  };

  return {
    answer(key) {
      const end = until.get(key);
      if (end === undefined) return undefined;
      const left = end - now();
      if (left <= 0) {
        until.delete(key);
        return undefined;
      }
      // As better-auth words it; the seconds left count the second left to better-auth.
      const retryAfter = Math.ceil(left / 1000) + 1;
      return new Response(RATE_LIMITED_BODY, {
        status: 429,
        statusText: "Too Many Requests",
        headers: { "content-type": "application/json", "x-retry-after": String(retryAfter) },
      });
    },
    async remember(key, response) {
      if (response.status !== 429) return;
      const retryAfter = Number(response.headers.get("x-retry-after"));
      if (!Number.isInteger(retryAfter) || retryAfter <= 1) return;
      if ((await response.clone().text()) !== RATE_LIMITED_BODY) return;
      if (until.size >= maxEntries) sweep();
      until.set(key, now() + (retryAfter - 1) * 1000);
    },
    get size() {
      return until.size;
    },
  };
}
