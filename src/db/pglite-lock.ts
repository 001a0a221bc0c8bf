import { open, readFile, rm } from "node:fs/promises";
import path from "node:path";

/**
 * PGlite admits one process at a time and does not lock its own directory, so a second process
 * would corrupt it. The server holds this lock file while it runs; other commands check it.
 */
export class DatabaseBusyError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`The embedded database in ${dataDir} is in use by the running server (pid ${pid}); stop the server first, or point DATABASE_URL at PostgreSQL.`);
    this.name = "DatabaseBusyError";
  }
}

export interface PgliteLock {
  release(): Promise<void>;
}

export async function acquirePgliteLock(dataDir: string): Promise<PgliteLock> {
  const file = path.join(dataDir, "pglite.lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(file, "wx", 0o600);
      await handle.writeFile(String(process.pid));
      await handle.close();
      return { release: () => rm(file, { force: true }) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const holder = Number((await readFile(file, "utf8").catch(() => "")).trim());
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder)) {
        throw new DatabaseBusyError(dataDir, holder);
      }
      await rm(file, { force: true }); // stale: its process is gone
    }
  }
  throw new Error(`Could not take the lock ${file}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
