import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { generateSecret } from "../crypto/secrets.js";

/**
 * The auth secret for a deployment that did not set BETTER_AUTH_SECRET (never production): made once
 * and kept in the data directory (mode 0600), so sessions survive a restart.
 */
export async function loadOrCreateSecret(dataDir: string): Promise<string> {
  const file = path.join(dataDir, "auth-secret");
  try {
    const existing = (await readFile(file, "utf8")).trim();
    if (existing.length >= 32) return existing;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  await mkdir(dataDir, { recursive: true });
  const secret = generateSecret("", 48);
  await writeFile(file, secret + "\n", { mode: 0o600 });
  return secret;
}
