import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import { agentVersion, isOlderVersion, type UpdateReport } from "../../protocol/index.js";

/** The last update a device reported, as stored (migration 0073) and shown on /devices. */
export interface StoredUpdateReport extends UpdateReport {
  /** When the server heard of it (the device's `at` is its own clock). */
  receivedAt: string;
}

/** Keeps the device's latest report, replacing the one before. */
export async function recordUpdateReport(db: Kysely<Database>, deviceId: string, report: UpdateReport, receivedAt = new Date()): Promise<void> {
  const stored: StoredUpdateReport = { ...report, receivedAt: receivedAt.toISOString() };
  await db
    .updateTable("host_device")
    .set({ last_update: JSON.stringify(stored) })
    .where("id", "=", deviceId)
    .execute();
}

/** The stored value, if it has the shape this server writes (anything else reads as none). */
export function storedUpdateReport(value: unknown): StoredUpdateReport | null {
  const report = value as Partial<StoredUpdateReport> | null;
  return report && typeof report.ok === "boolean" && typeof report.from === "string" && typeof report.receivedAt === "string"
    ? (report as StoredUpdateReport)
    : null;
}

/** True when the device announced a tether-host older than the server's minimum (`MIN_HOST_VERSION`). */
export function belowMinimum(agent: string | null, minimum: string | undefined): boolean {
  const running = agentVersion(agent);
  return minimum !== undefined && running !== undefined && isOlderVersion(running, minimum);
}
