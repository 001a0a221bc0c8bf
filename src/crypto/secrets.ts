import * as crypto from "node:crypto";
import { createHash, randomBytes, randomInt, timingSafeEqual } from "node:crypto";

/**
 * `crypto.hash` (Node 20.12 and later) digests a short string in one call, a third of the time of
 * `createHash().update().digest()`: API and device tokens are hashed on every request that carries
 * one. Older Node 20 releases take the long way.
 */
const oneShotHash = (crypto as { hash?: (algorithm: string, data: string, encoding: "hex") => string }).hash;

/**
 * The one place Tether hashes and compares secrets (API tokens, device tokens, pairing codes, shared
 * secrets). Every secret we mint has at least 128 bits of entropy, so a fast SHA-256 digest is the
 * right hash: a slow password hash would add latency to every request without adding security.
 */
export function hashSecret(secret: string): string {
  return oneShotHash ? oneShotHash("sha256", secret, "hex") : createHash("sha256").update(secret, "utf8").digest("hex");
}

/** Constant-time comparison of two strings of any length (digests first, so lengths leak nothing). */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash("sha256").update(a, "utf8").digest(), createHash("sha256").update(b, "utf8").digest());
}

/** A URL-safe random secret with `bytes` bytes of entropy, optionally prefixed (e.g. `sk_`). */
export function generateSecret(prefix = "", bytes = 32): string {
  return prefix + randomBytes(bytes).toString("base64url");
}

/**
 * A random code of `length` characters drawn uniformly from `alphabet` (e.g. a typeable pairing code
 * from an unambiguous alphabet). Entropy is length × log2(alphabet size) bits: size it for its use.
 */
export function generateCode(alphabet: string, length: number): string {
  let code = "";
  for (let i = 0; i < length; i++) code += alphabet[randomInt(alphabet.length)];
  return code;
}
