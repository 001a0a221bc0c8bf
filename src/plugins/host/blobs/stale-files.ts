import { lstat, readdir, rm } from "node:fs/promises";
import path from "node:path";

/**
 * How long a half-written upload file (the embedded store's `BLOB_DIR/tmp`, the browser uploads' `BLOB_DIR/staging`)
 * may go unwritten before the sweep removes it. A live upload writes its file as its bytes arrive, so its
 * modification time stays fresh; a file a killed process left behind stops changing. Age is the test, not "present
 * at start": replicas sharing one `BLOB_DIR` (tested with Redis) must never delete each other's live uploads. An
 * upload that stalls this long without a byte is lost (its `rename` fails: 503, fetch again); the device's upload
 * call gives up after 10 minutes anyway.
 */
export const STALE_UPLOAD_FILE_MS = 60 * 60_000;

/** The names our upload files take (`embedded-store.ts`, `staged-upload.ts`): nothing else in a folder is ever removed. */
export const UNFINISHED_STORE_FILE = /^b_[A-Za-z0-9_-]{22}\.[0-9a-f]{12}$/;
export const UNFINISHED_STAGED_FILE = /^upload-[0-9a-f]{24}$/;

/**
 * Removes the regular files directly in `dir` whose names match `names` and that were not modified for
 * `olderThanMs`; how many. A missing folder is none.
 */
export async function removeStaleFiles(dir: string, names: RegExp, olderThanMs: number, now = Date.now()): Promise<number> {
  const entries = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [] as string[];
    throw error;
  });
  let removed = 0;
  for (const name of entries) {
    if (!names.test(name)) continue;
    const file = path.join(dir, name);
    const info = await lstat(file).catch(() => undefined);
    if (!info?.isFile() || now - info.mtimeMs < olderThanMs) continue;
    await rm(file, { force: true });
    removed++;
  }
  return removed;
}
