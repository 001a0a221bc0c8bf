import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Short signed tokens a client holds and hands back (MCP's `requestState`): a JSON payload with an
 * expiry, authenticated with HMAC-SHA256 under a key derived from the app secret for one purpose, so
 * a state minted for one use never verifies for another. Signed, not encrypted: put nothing secret in.
 * Wire shape: `base64url(JSON{...payload, exp}) "." base64url(mac)`.
 */
export interface SignedStateKey {
  readonly key: Buffer;
}

/** The key for one purpose (e.g. `mcp-approval`), derived from the app secret. */
export function signedStateKey(appSecret: string, purpose: string): SignedStateKey {
  return { key: createHmac("sha256", appSecret).update(`tether:signed-state:${purpose}`).digest() };
}

/** Signs `payload` (a JSON object), valid until `expiresAt`. */
export function signState(key: SignedStateKey, payload: Record<string, unknown>, expiresAt: Date): string {
  const body = Buffer.from(JSON.stringify({ ...payload, exp: Math.floor(expiresAt.getTime() / 1000) })).toString("base64url");
  return `${body}.${createHmac("sha256", key.key).update(body).digest("base64url")}`;
}

/** Why a state is refused; never the payload itself. */
export type StateRefusal = "malformed" | "mac" | "expired";

/** The payload of a state this key signed and that has not expired, or why not. */
export function verifyState(
  key: SignedStateKey,
  state: string,
  now = Date.now(),
): { ok: true; payload: Record<string, unknown> } | { ok: false; reason: StateRefusal } {
  const dot = state.indexOf(".");
  if (dot <= 0 || state.length > 4096) return { ok: false, reason: "malformed" };
  const body = state.slice(0, dot);
  const mac = Buffer.from(state.slice(dot + 1), "base64url");
  const expected = createHmac("sha256", key.key).update(body).digest();
  if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) return { ok: false, reason: "mac" };
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
  } catch {
    return { ok: false, reason: "malformed" };
  }
  if (typeof payload !== "object" || payload === null || typeof (payload as { exp?: unknown }).exp !== "number") return { ok: false, reason: "malformed" };
  if ((payload as { exp: number }).exp * 1000 <= now) return { ok: false, reason: "expired" };
  return { ok: true, payload: payload as Record<string, unknown> };
}
