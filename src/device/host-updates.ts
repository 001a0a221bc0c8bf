import { isOlderVersion, type HelloReply, type UpdateReport } from "../protocol/index.js";
import type { HostClient } from "./client.js";
import type { UpdatePolicy } from "./config.js";
import { hostPlatform } from "./config.js";
import { readUpdateReport, saveUpdateReport } from "./state.js";
import type { UpdateOutcome } from "./update.js";
import { HOST_VERSION } from "./version.js";

/** What `runHost` does when the server offers a newer tether-host. */
export interface HostUpdates {
  /** `notify` by default (see config-file.ts). */
  policy: UpdatePolicy;
  /** Installs the release on offer (the CLI passes its executable's updater); without it, notices only. */
  install?: () => Promise<UpdateOutcome>;
  /**
   * Under a service manager: after an update, the host exits with `UPDATED_EXIT_CODE` and the manager starts
   * the new executable. Otherwise it keeps running the old one and says to restart.
   */
  restartAfterUpdate?: boolean;
}

/** An update attempt as reported to the server, or undefined when nothing happened (already current). */
export function reportOf(outcome: UpdateOutcome, trigger: UpdateReport["trigger"]): UpdateReport | undefined {
  const at = new Date().toISOString();
  if (outcome.status === "current") return undefined;
  if (outcome.status === "updated") return { ok: true, from: outcome.from, to: outcome.to, trigger, at };
  return { ok: false, from: outcome.from, ...(outcome.to ? { to: outcome.to } : {}), trigger, code: outcome.code, message: outcome.message.slice(0, 1000), at };
}

/**
 * Keeps the report (so a failure to reach the server loses nothing), then tells the server; a report the
 * server did not take is sent again after the next hello.
 */
export async function recordUpdate(configDir: string, client: HostClient | undefined, report: UpdateReport, log: (line: string) => void): Promise<void> {
  await saveUpdateReport(configDir, { report, reported: false }).catch((error: unknown) =>
    log(`tether-host: cannot keep the update report: ${(error as Error).message}`),
  );
  if (!client) return;
  try {
    await client.updateReport(report);
    await saveUpdateReport(configDir, { report, reported: true }).catch(() => {});
  } catch (error) {
    log(`tether-host: the server did not take the update report (${(error as Error).message}); it is sent again on the next connection`);
  }
}

/** The update side of a connected host: notices, the minimum version, automatic updates, pending reports. */
export class UpdateAgent {
  private noticed = new Set<string>();
  private attempted = new Set<string>();
  private installing = false;

  constructor(
    private readonly args: {
      client: HostClient;
      server: string;
      configDir: string;
      updates: HostUpdates;
      log: (line: string) => void;
      /** An update is in place and the service manager should start it: end the session. */
      onRestartNeeded: () => void;
    },
  ) {}

  /** After each hello: what the server said about versions, and any report it has not heard yet. */
  afterHello(reply: HelloReply): void {
    const { log, updates, configDir, client } = this.args;
    void readUpdateReport(configDir).then(async (stored) => {
      if (stored && !stored.reported) await recordUpdate(configDir, client, stored.report, () => {});
    });
    const minimum = reply.minimumHostVersion;
    if (minimum && isOlderVersion(HOST_VERSION, minimum) && !this.noticed.has(`minimum:${minimum}`)) {
      this.noticed.add(`minimum:${minimum}`);
      log(
        `tether-host: this server supports tether-host ${minimum} or later; this is ${HOST_VERSION}, which the device owner sees as outdated. Run \`tether-host update\`.`,
      );
    }
    const offered = reply.hostVersion;
    if (!offered || !isOlderVersion(HOST_VERSION, offered) || updates.policy === "off") return;
    if (updates.policy === "auto" && updates.install) {
      this.autoUpdate(offered);
      return;
    }
    if (this.noticed.has(offered)) return;
    this.noticed.add(offered);
    const file = `tether-host-${hostPlatform()}${process.platform === "win32" ? ".exe" : ""}`;
    log(
      `tether-host: an update is available: ${offered} (this is ${HOST_VERSION}). Run \`tether-host update\` (or set "update": "auto"), or download ${this.args.server}/downloads/${file} and replace this executable.`,
    );
  }

  /** Once per offered version and run: a failed attempt is reported, and tried again only when a newer one is offered or the host restarts. */
  private autoUpdate(offered: string): void {
    const { updates, log, configDir, client } = this.args;
    if (this.installing || this.attempted.has(offered)) return;
    this.attempted.add(offered);
    this.installing = true;
    log(`tether-host: the server offers ${offered} (this is ${HOST_VERSION}); updating automatically ("update": "auto")`);
    void updates.install!()
      .then(async (outcome) => {
        const report = reportOf(outcome, "auto");
        if (report) await recordUpdate(configDir, client, report, log);
        if (outcome.status !== "updated") return;
        if (updates.restartAfterUpdate) {
          log(`tether-host: ${outcome.to} is in place; exiting so the service manager starts it`);
          this.args.onRestartNeeded();
        } else {
          log(`tether-host: ${outcome.to} is in place; restart tether-host to run it (this process keeps running ${HOST_VERSION})`);
        }
      })
      .catch((error: unknown) => log(`tether-host: automatic update failed: ${(error as Error).message}`))
      .finally(() => (this.installing = false));
  }
}
