/**
 * The keys `npm run build:host` signs the release manifest with, and the public keys it builds into the
 * executable (which `tether-host update` trusts, and nothing else):
 *
 * - `TETHER_SIGNING_KEY`: PEM text of one or more Ed25519 private keys (PKCS #8, `-----BEGIN PRIVATE KEY-----`),
 *   for CI secrets; or `TETHER_SIGNING_KEY_FILE`: a file holding them. Every key given signs.
 * - Neither: a development key, generated once into `dist/host/dev-signing-key.pem` (mode 0600, never
 *   committed: dist/ is ignored). Executables built with it only accept releases built on the same checkout.
 * - `TETHER_TRUSTED_KEYS_FILE`: further Ed25519 public keys (PEM, SubjectPublicKeyInfo) to build in without
 *   signing with them: the next key, during a rotation.
 *
 * `openssl genpkey -algorithm ed25519 -out release.pem` makes a release key.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";
import { link, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { keyIdOf, publicKeyText } from "../src/protocol/manifest.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const DEV_SIGNING_KEY = path.join(ROOT, "dist", "host", "dev-signing-key.pem");

export interface SigningKeys {
  /** Sign the manifest. */
  privateKeys: KeyObject[];
  /** Built into the executable: the signing keys' public halves, then the extra trusted keys. */
  trustedKeys: string[];
  /** Where the signing keys came from, for the build's log (never the key). */
  source: string;
}

type Env = Record<string, string | undefined>;

const PEM_BLOCK = /-----BEGIN ([A-Z ]+)-----[\s\S]+?-----END \1-----/g;

function ed25519(key: KeyObject, where: string): KeyObject {
  if (key.asymmetricKeyType !== "ed25519") throw new Error(`build:host: ${where} holds a ${key.asymmetricKeyType} key; release signing keys are Ed25519`);
  return key;
}

function privateKeysIn(pem: string, where: string): KeyObject[] {
  const blocks = [...pem.matchAll(PEM_BLOCK)].filter((match) => match[1]!.endsWith("PRIVATE KEY"));
  if (blocks.length === 0) throw new Error(`build:host: ${where} holds no PEM private key`);
  return blocks.map((block) => {
    try {
      return ed25519(createPrivateKey(block[0]), where);
    } catch (error) {
      throw new Error(`build:host: ${where}: ${(error as Error).message.replace(/^build:host: /, "")}`, { cause: error });
    }
  });
}

/** The development key, made once: written beside and linked into place, so parallel builds agree on one. */
async function developmentKey(): Promise<string> {
  try {
    return await readFile(DEV_SIGNING_KEY, "utf8");
  } catch {
    /* first build on this checkout */
  }
  await mkdir(path.dirname(DEV_SIGNING_KEY), { recursive: true });
  const pem = generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString();
  const temporary = `${DEV_SIGNING_KEY}.${process.pid}.tmp`;
  await writeFile(temporary, pem, { mode: 0o600 });
  try {
    await link(temporary, DEV_SIGNING_KEY);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    await rm(temporary, { force: true });
  }
  return readFile(DEV_SIGNING_KEY, "utf8");
}

export async function loadSigningKeys(env: Env = process.env): Promise<SigningKeys> {
  let privateKeys: KeyObject[];
  let source: string;
  if (env.TETHER_SIGNING_KEY?.trim()) {
    privateKeys = privateKeysIn(env.TETHER_SIGNING_KEY, "TETHER_SIGNING_KEY");
    source = "TETHER_SIGNING_KEY";
  } else if (env.TETHER_SIGNING_KEY_FILE?.trim()) {
    const file = path.resolve(env.TETHER_SIGNING_KEY_FILE.trim());
    let pem: string;
    try {
      pem = await readFile(file, "utf8");
    } catch (error) {
      throw new Error(`build:host: TETHER_SIGNING_KEY_FILE=${file} cannot be read: ${(error as Error).message}`, { cause: error });
    }
    privateKeys = privateKeysIn(pem, `TETHER_SIGNING_KEY_FILE=${file}`);
    source = file;
  } else {
    privateKeys = privateKeysIn(await developmentKey(), DEV_SIGNING_KEY);
    source = `${path.relative(ROOT, DEV_SIGNING_KEY)} (development key: set TETHER_SIGNING_KEY_FILE for releases)`;
  }
  const trustedKeys = privateKeys.map((key) => publicKeyText(createPublicKey(key)));
  if (env.TETHER_TRUSTED_KEYS_FILE?.trim()) {
    const file = path.resolve(env.TETHER_TRUSTED_KEYS_FILE.trim());
    let pem: string;
    try {
      pem = await readFile(file, "utf8");
    } catch (error) {
      throw new Error(`build:host: TETHER_TRUSTED_KEYS_FILE=${file} cannot be read: ${(error as Error).message}`, { cause: error });
    }
    const blocks = [...pem.matchAll(PEM_BLOCK)].filter((match) => match[1] === "PUBLIC KEY");
    if (blocks.length === 0) throw new Error(`build:host: TETHER_TRUSTED_KEYS_FILE=${file} holds no PEM public key`);
    for (const block of blocks) trustedKeys.push(publicKeyText(ed25519(createPublicKey(block[0]), `TETHER_TRUSTED_KEYS_FILE=${file}`)));
  }
  return { privateKeys, trustedKeys: [...new Set(trustedKeys)], source };
}

/** How the build log names the keys: their ids, never the keys. */
export function describeKeys(keys: SigningKeys): string {
  return `signed by ${keys.privateKeys.map((key) => keyIdOf(publicKeyText(createPublicKey(key)))).join(", ")} from ${keys.source}; trusts ${keys.trustedKeys.map(keyIdOf).join(", ")}`;
}
