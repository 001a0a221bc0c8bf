/**
 * Signing in returns to the page that asked: the route guard and the OAuth sign-in stop send a signed-out
 * browser to `/login?next=<path>`, and every way of signing in (password, two-factor, passkey) ends there.
 *
 * Only a path on this site is ever followed: `/devices`, `/device?user_code=ABCD-EFGH`. Anything a browser
 * could read as another site is refused, in any spelling: `//evil.example` and `/\evil.example` (browsers
 * treat `\` as `/`), absolute URLs, encoded variants (`/%2F%2Fevil`, `/%5Cevil`), control characters and
 * whitespace (browsers drop tabs and newlines from URLs, so `/\t/evil` is `//evil`).
 */

/** The query parameter that carries the return path. */
export const RETURN_PARAM = "next";

/** Longer than any page address here (an OAuth authorization request is the longest). */
export const RETURN_PATH_MAX_LENGTH = 4000;
const BASE = "http://return-path.invalid";

function plainPath(value: string): boolean {
  // No control characters, spaces or backslashes at all, and one leading slash only.
  for (const char of value) {
    const code = char.charCodeAt(0);
    if (code <= 0x20 || code === 0x7f || char === "\\") return false;
  }
  return value.startsWith("/") && !value.startsWith("//");
}

/** The same-origin relative path `value` names, or undefined when it is anything else. */
export function safeReturnPath(value: unknown): string | undefined {
  if (typeof value !== "string" || value.length === 0 || value.length > RETURN_PATH_MAX_LENGTH) return undefined;
  if (!plainPath(value)) return undefined;
  // The path part decoded once and twice: an encoded `//` or `\` is refused too, whoever decodes it later.
  // (The query may hold anything encoded: it cannot change where the browser goes.)
  let decoded = value.split(/[?#]/)[0]!;
  for (let round = 0; round < 2; round++) {
    try {
      decoded = decodeURIComponent(decoded);
    } catch {
      return undefined;
    }
    if (!plainPath(decoded)) return undefined;
  }
  let url: URL;
  try {
    url = new URL(value, BASE);
  } catch {
    return undefined;
  }
  if (url.origin !== BASE) return undefined;
  return `${url.pathname}${url.search}${url.hash}`;
}

/** `/login`, or `/login?next=<path>` when `path` is a safe return path other than home. */
export function loginPath(path: string | undefined, home = "/home"): string {
  const safe = safeReturnPath(path);
  return safe && safe !== home ? `/login?${RETURN_PARAM}=${encodeURIComponent(safe)}` : "/login";
}

/** Where to land after signing in: the safe return path, else home. */
export function afterSignIn(path: unknown, home = "/home"): string {
  return safeReturnPath(path) ?? home;
}
