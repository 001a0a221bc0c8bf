import path from "node:path";
import type { UpdateReport } from "../protocol/index.js";
import { readJsonFile, writePrivateFile } from "./private-file.js";

/**
 * What a running tether-host says about itself, for `tether-host status` (another process): written to
 * `<configDir>/state.json` when it starts, connects, disconnects or hears of a release, never per call.
 */
export interface HostState {
  pid: number;
  version: string;
  /** The embedded Node (`process.versions.node`). */
  node: string;
  server: string;
  deviceId?: string;
  startedAt: string;
  connected: boolean;
  /** When it last connected (connected) or lost the connection (not connected). */
  since: string;
  /** Why the last connection ended. */
  lastError?: string;
  /** The version the server offered at the last hello, and its minimum, if it names one. */
  offered?: string;
  minimum?: string;
  /** The service manager running it (`systemd`, `launchd`, `task`), from `TETHER_SERVICE`. */
  service?: string;
}

export const STATE_FILE = "state.json";
/** The last update attempted, and whether the server has heard of it yet. */
export const UPDATE_REPORT_FILE = "last-update.json";

export interface StoredUpdateReport {
  report: UpdateReport;
  reported: boolean;
}

export async function writeState(configDir: string, state: HostState): Promise<void> {
  await writePrivateFile(path.join(configDir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
}

export async function readState(configDir: string): Promise<HostState | undefined> {
  return readJsonFile<HostState>(path.join(configDir, STATE_FILE)).catch(() => undefined);
}

export async function saveUpdateReport(configDir: string, stored: StoredUpdateReport): Promise<void> {
  await writePrivateFile(path.join(configDir, UPDATE_REPORT_FILE), `${JSON.stringify(stored, null, 2)}\n`);
}

export async function readUpdateReport(configDir: string): Promise<StoredUpdateReport | undefined> {
  const stored = await readJsonFile<StoredUpdateReport>(path.join(configDir, UPDATE_REPORT_FILE)).catch(() => undefined);
  return stored && typeof stored.report === "object" && stored.report !== null ? stored : undefined;
}

/** True when a process with this id exists (the state file may outlive a killed host). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The running host's side: merges each change into the state and writes it, one write at a time; a failed write only loses status. */
export class StateRecorder {
  private state: HostState;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly configDir: string,
    initial: HostState,
  ) {
    this.state = initial;
    this.set({});
  }

  /** Records a change; the file is written in the background, in order (`flush` waits for it). */
  set(patch: Partial<HostState>): void {
    this.state = { ...this.state, ...patch };
    const snapshot = this.state;
    this.writing = this.writing.then(() => writeState(this.configDir, snapshot)).catch(() => {});
  }

  /** Waits for the last write (the process is about to exit). */
  flush(): Promise<void> {
    return this.writing;
  }
}
