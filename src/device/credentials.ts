import { rm } from "node:fs/promises";
import path from "node:path";
import { readJsonFile, writePrivateFile } from "./private-file.js";

/**
 * The device credential, kept in `<configDir>/credentials.json` (mode 0600, directory 0700; see
 * private-file.ts for Windows), one entry per server address so one machine can be paired with several servers.
 */
export interface DeviceCredential {
  deviceId: string;
  token: string;
  name: string;
  pairedAt: string;
}

interface CredentialFile {
  version: 1;
  servers: Record<string, DeviceCredential>;
}

export const CREDENTIAL_FILE = "credentials.json";

export function credentialPath(configDir: string): string {
  return path.join(configDir, CREDENTIAL_FILE);
}

async function readAll(configDir: string): Promise<CredentialFile> {
  const parsed = await readJsonFile<Partial<CredentialFile>>(credentialPath(configDir));
  return { version: 1, servers: parsed?.servers && typeof parsed.servers === "object" ? parsed.servers : {} };
}

async function writeAll(configDir: string, file: CredentialFile): Promise<void> {
  await writePrivateFile(credentialPath(configDir), `${JSON.stringify(file, null, 2)}\n`);
}

export async function loadCredential(configDir: string, server: string): Promise<DeviceCredential | undefined> {
  const credential = (await readAll(configDir)).servers[server];
  return credential && typeof credential.token === "string" && typeof credential.deviceId === "string" ? credential : undefined;
}

export async function saveCredential(configDir: string, server: string, credential: DeviceCredential): Promise<void> {
  const file = await readAll(configDir);
  file.servers[server] = credential;
  await writeAll(configDir, file);
}

/** Forgets the server's credential (it was revoked); the file goes when it holds no other. */
export async function forgetCredential(configDir: string, server: string): Promise<void> {
  const file = await readAll(configDir);
  if (!(server in file.servers)) return;
  delete file.servers[server];
  if (Object.keys(file.servers).length === 0) await rm(credentialPath(configDir), { force: true });
  else await writeAll(configDir, file);
}
