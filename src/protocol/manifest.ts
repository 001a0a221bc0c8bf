/**
 * The signed release manifest: what `npm run build:host` writes beside the executables
 * (`manifest.json`), what the server serves at `/downloads/manifest.json`, and what `tether-host
 * update` verifies before it replaces itself. The server only passes it on: the device trusts the
 * public keys built into it, never the server.
 *
 *   {
 *     "signed": { "format": 1, "version": "0.2.0", "node": "24.21.0", "files": {
 *       "linux-x64": { "file": "tether-host-linux-x64", "size": 128191680, "sha256": "…" } } },
 *     "signatures": [{ "keyId": "3f2a…", "signature": "<base64 Ed25519>" }]
 *   }
 *
 * Each signature is Ed25519 over the canonical bytes of `signed` (`canonicalJson`: keys sorted, no
 * whitespace, UTF-8), so the bytes verified are the values used, whatever whitespace or key order the
 * file was stored with. Several signatures let a release be signed by an outgoing and an incoming key
 * while devices move from one to the other (see docs/devices.md, key rotation). Pure: `node:crypto`,
 * no I/O, safe to bundle into the device.
 */
import { createHash, createPublicKey, sign, verify, type KeyObject } from "node:crypto";
import { parseVersion } from "./versions.js";

export const MANIFEST_FILE = "manifest.json";
export const MANIFEST_FORMAT = 1;
/** A manifest larger than this is refused before parsing (a real one is under 2 KB). */
export const MAX_MANIFEST_BYTES = 64 * 1024;

export interface ManifestEntry {
  /** The download's file name (`tether-host-linux-x64`, `tether-host-win-x64.exe`), served at `/downloads/<file>`. */
  file: string;
  size: number;
  /** Lower-case hex. */
  sha256: string;
}

export interface ManifestBody {
  format: typeof MANIFEST_FORMAT;
  version: string;
  /** The Node version the executables embed. */
  node: string;
  /** Per platform (`linux-x64`, `linux-arm64`, `win-x64`, …). */
  files: Record<string, ManifestEntry>;
}

export interface ManifestSignature {
  keyId: string;
  signature: string;
}

export interface SignedManifest {
  signed: ManifestBody;
  signatures: ManifestSignature[];
}

export const DOWNLOAD_FILE_NAME = /^tether-host-[a-z0-9]+-[a-z0-9]+(\.exe)?$/;
const PLATFORM = /^[a-z0-9]+-[a-z0-9]+$/;
const SHA256 = /^[0-9a-f]{64}$/;

/** JSON with object keys sorted at every level and no whitespace; only strings, safe integers, booleans, arrays and objects. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new TypeError(`canonical JSON holds whole numbers only (got ${value})`);
    return String(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(",")}}`;
  }
  throw new TypeError(`canonical JSON cannot hold ${typeof value}`);
}

/** A public key as built into the executable: its SubjectPublicKeyInfo (DER), base64. */
export function publicKeyText(key: KeyObject): string {
  return key.export({ format: "der", type: "spki" }).toString("base64");
}

/** The first 16 hex digits of the SHA-256 of the key's SubjectPublicKeyInfo: names the key in a signature. */
export function keyIdOf(publicKey: string): string {
  return createHash("sha256").update(Buffer.from(publicKey, "base64")).digest("hex").slice(0, 16);
}

/** Signs `body` with each private key (Ed25519). */
export function signManifest(body: ManifestBody, privateKeys: readonly KeyObject[]): SignedManifest {
  const bytes = Buffer.from(canonicalJson(body), "utf8");
  const signatures = privateKeys.map((key) => {
    if (key.asymmetricKeyType !== "ed25519") throw new TypeError(`a signing key must be Ed25519 (got ${key.asymmetricKeyType})`);
    return { keyId: keyIdOf(publicKeyText(createPublicKey(key))), signature: sign(null, bytes, key).toString("base64") };
  });
  return { signed: body, signatures };
}

export type ManifestVerdict =
  | { ok: true; manifest: ManifestBody; keyId: string }
  | { ok: false; code: "MANIFEST_INVALID" | "MANIFEST_UNTRUSTED_KEY" | "MANIFEST_SIGNATURE_INVALID"; message: string };

/** Checks the shape of `signed` (before a signature is even looked at, so nothing unchecked is canonicalised). */
function describeBody(value: unknown): ManifestBody | string {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "signed is not an object";
  const body = value as Record<string, unknown>;
  if (body.format !== MANIFEST_FORMAT) return `format ${JSON.stringify(body.format)} is not ${MANIFEST_FORMAT}`;
  if (typeof body.version !== "string" || !parseVersion(body.version) || body.version.length > 64) return "version is not a version";
  if (typeof body.node !== "string" || body.node.length > 64) return "node is not a string";
  if (typeof body.files !== "object" || body.files === null || Array.isArray(body.files)) return "files is not an object";
  for (const [platform, entry] of Object.entries(body.files as Record<string, unknown>)) {
    if (!PLATFORM.test(platform)) return `files: "${platform.slice(0, 40)}" is not a platform`;
    const { file, size, sha256 } = (entry ?? {}) as Record<string, unknown>;
    if (typeof file !== "string" || !DOWNLOAD_FILE_NAME.test(file)) return `files.${platform}.file is not a tether-host file name`;
    if (typeof size !== "number" || !Number.isSafeInteger(size) || size <= 0) return `files.${platform}.size is not a positive whole number`;
    if (typeof sha256 !== "string" || !SHA256.test(sha256)) return `files.${platform}.sha256 is not a hex SHA-256`;
  }
  return value as ManifestBody;
}

/**
 * Verifies a manifest as fetched: it must carry a valid Ed25519 signature, over the canonical bytes
 * of `signed`, by one of `trustedKeys` (base64 SubjectPublicKeyInfo). A signature by any other key is
 * ignored, never an error on its own: a release may be signed by a key this build does not know yet.
 */
export function verifyManifest(document: unknown, trustedKeys: readonly string[]): ManifestVerdict {
  const invalid = (message: string): ManifestVerdict => ({ ok: false, code: "MANIFEST_INVALID", message: `The release manifest is malformed: ${message}` });
  if (typeof document !== "object" || document === null) return invalid("not an object");
  const { signed, signatures } = document as Partial<SignedManifest>;
  const body = describeBody(signed);
  if (typeof body === "string") return invalid(body);
  if (!Array.isArray(signatures) || signatures.length === 0 || signatures.length > 16) return invalid("signatures must be a list of 1 to 16");
  let bytes: Buffer;
  try {
    bytes = Buffer.from(canonicalJson(body), "utf8");
  } catch (error) {
    return invalid((error as Error).message);
  }
  const trusted = new Map(trustedKeys.map((key) => [keyIdOf(key), key]));
  let byTrustedKey = 0;
  for (const entry of signatures) {
    const { keyId, signature } = (entry ?? {}) as Partial<ManifestSignature>;
    if (typeof keyId !== "string" || typeof signature !== "string") return invalid("a signature needs keyId and signature");
    const key = trusted.get(keyId);
    if (!key) continue;
    byTrustedKey++;
    let valid: boolean;
    try {
      valid = verify(null, bytes, createPublicKey({ key: Buffer.from(key, "base64"), format: "der", type: "spki" }), Buffer.from(signature, "base64"));
    } catch {
      valid = false;
    }
    if (valid) return { ok: true, manifest: body, keyId };
  }
  if (byTrustedKey === 0) {
    const known = [...trusted.keys()].join(", ") || "none";
    return {
      ok: false,
      code: "MANIFEST_UNTRUSTED_KEY",
      message: `The release manifest is not signed by a key this tether-host trusts (signed by ${signatures.map((s) => String(s?.keyId).slice(0, 16)).join(", ")}; trusted: ${known})`,
    };
  }
  return { ok: false, code: "MANIFEST_SIGNATURE_INVALID", message: "The release manifest's signature does not verify: it was altered after signing" };
}
