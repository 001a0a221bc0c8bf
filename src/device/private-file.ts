import { execFile } from "node:child_process";
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/**
 * Files in the configuration directory that only the device's user may read (the credential, the running
 * host's state): mode 0600 in a 0700 directory on Unix; on Windows, an ACL granting the user alone (the
 * profile's `%APPDATA%` already excludes other users; `icacls` drops the inherited entries too).
 */
export async function writePrivateFile(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  // Written to a private temporary file and renamed into place, so a crash never leaves half a file.
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    await writeFile(temporary, text, { mode: 0o600 });
    await chmod(temporary, 0o600);
    await rename(temporary, file);
  } finally {
    await rm(temporary, { force: true });
  }
  if (process.platform === "win32") await restrictOnWindows(file);
}

/** `icacls <file> /inheritance:r /grant:r <user>:F`; a failure leaves the profile's own ACL, which is already the user's. */
function restrictOnWindows(file: string): Promise<void> {
  const user = process.env.USERNAME || os.userInfo().username;
  return new Promise((resolve) => execFile("icacls", [file, "/inheritance:r", "/grant:r", `${user}:F`], { windowsHide: true }, () => resolve()));
}

export async function readJsonFile<T>(file: string): Promise<T | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw new Error(`${file} is not valid JSON (${(error as Error).message}); move it away to start over`, { cause: error });
  }
}

/**
 * Puts back 0700 on the directory and 0600 on `files` in it where someone loosened them (Unix); returns a line
 * per change, for the log. A credential another user could read must not stay that way silently.
 */
export async function tightenPermissions(dir: string, files: readonly string[]): Promise<string[]> {
  if (process.platform === "win32") return [];
  const changed: string[] = [];
  const tighten = async (target: string, mode: number) => {
    const info = await stat(target).catch(() => undefined);
    if (!info || (info.mode & 0o777) === mode || (info.mode & 0o077) === 0) return;
    await chmod(target, mode);
    changed.push(`${target} was mode ${(info.mode & 0o777).toString(8)}; set to ${mode.toString(8)}`);
  };
  await tighten(dir, 0o700);
  for (const file of files) await tighten(path.join(dir, file), 0o600);
  return changed;
}
