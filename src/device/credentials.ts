import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * The device credential, kept in `<configDir>/credentials.json` (mode 0600, directory 0700), one entry
 * per server address so one machine can be paired with several servers.
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
  let text: string;
  try {
    text = await readFile(credentialPath(configDir), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { version: 1, servers: {} };
    throw error;
  }
  const parsed = JSON.parse(text) as Partial<CredentialFile>;
  return { version: 1, servers: parsed.servers && typeof parsed.servers === "object" ? parsed.servers : {} };
}

/** Written to a private temporary file and renamed into place, so a crash never leaves half a file. */
async function writeAll(configDir: string, file: CredentialFile): Promise<void> {
  await mkdir(configDir, { recursive: true, mode: 0o700 });
  const target = credentialPath(configDir);
  const temporary = `${target}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, target);
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
