import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Verifies a better-auth signed cookie value (`<token>.<base64 HMAC-SHA256>`) with node:crypto, the
 * same check better-call makes, without its async WebCrypto round trip. Returns the token, or null.
 */
export function verifySignedCookie(value: string, secret: string): string | null {
  const dot = value.lastIndexOf(".");
  if (dot < 1) return null;
  const token = value.slice(0, dot);
  const signature = value.slice(dot + 1);
  if (signature.length !== 44 || !signature.endsWith("=")) return null;
  const expected = createHmac("sha256", secret).update(token).digest();
  const presented = Buffer.from(signature, "base64");
  if (presented.length !== expected.length) return null;
  return timingSafeEqual(presented, expected) ? token : null;
}
