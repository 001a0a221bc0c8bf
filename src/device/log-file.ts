import { appendFileSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import path from "node:path";

/** Rotated when it passes this size; the three previous files are kept (`.1` newest). */
export const LOG_FILE_MAX_BYTES = 10 * 1024 * 1024;
export const LOG_FILES_KEPT = 3;

/**
 * The log of a tether-host run by a service manager that keeps none of its own (launchd writes a file it
 * never rotates; a Windows scheduled task keeps nothing): lines are appended with a timestamp, and the file
 * is rotated by size. Synchronous appends: log lines are few (connections, updates, failures), and a line
 * written just before a crash must be on disk. Under systemd, journald keeps the log instead.
 */
export class RotatingLog {
  private size: number;

  constructor(
    readonly file: string,
    private readonly maxBytes = LOG_FILE_MAX_BYTES,
    private readonly kept = LOG_FILES_KEPT,
  ) {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    this.size = statSync(file, { throwIfNoEntry: false })?.size ?? 0;
  }

  write(text: string): void {
    const stamped = text
      .split("\n")
      .filter((line, index, lines) => line !== "" || index < lines.length - 1)
      .map((line) => `${new Date().toISOString()} ${line}\n`)
      .join("");
    if (stamped === "") return;
    try {
      if (this.size > 0 && this.size + stamped.length > this.maxBytes) this.rotate();
      appendFileSync(this.file, stamped, { mode: 0o600 });
      this.size += Buffer.byteLength(stamped);
    } catch {
      // A full or read-only disk must not stop the host: the line is lost, the host goes on.
    }
  }

  private rotate(): void {
    rmSync(`${this.file}.${this.kept}`, { force: true });
    for (let index = this.kept - 1; index >= 1; index--) {
      try {
        renameSync(`${this.file}.${index}`, `${this.file}.${index + 1}`);
      } catch {
        /* not that many yet */
      }
    }
    renameSync(this.file, `${this.file}.1`);
    this.size = 0;
  }
}
