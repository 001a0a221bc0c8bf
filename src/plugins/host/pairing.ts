import { randomUUID } from "node:crypto";
import { sql, type Kysely } from "kysely";
import { secretsEqual } from "../../crypto/secrets.js";
import type { Database } from "../../db/schema.js";
import { createDevice } from "./devices.js";
import { digests, formatPairingCode, generatePairingCode, parsePairingCode } from "./pairing-code-format.js";

/** Pairing codes: minting, and exchanging one for a device credential. */

export const PAIRING_CODE_TTL_MS = 10 * 60_000;
export const MAX_FAILED_ATTEMPTS = 5;

export interface MintedPairingCode {
  /** Shown as `ABCDE-FGHJK`. */
  code: string;
  expiresAt: Date;
}

export type EnrollOutcome = { ok: true; deviceId: string; token: string; userId: string } | { ok: false; reason: "invalid" | "expired" | "used" | "void" };

/** Mints a one-time code for `userId`. Expired codes are swept first (they keep the handle space free). */
export async function mintPairingCode(db: Kysely<Database>, userId: string, ttlMs = PAIRING_CODE_TTL_MS): Promise<MintedPairingCode> {
  await db.deleteFrom("host_pairing_code").where("expires_at", "<", new Date()).execute();
  const expiresAt = new Date(Date.now() + ttlMs);
  // Handles are unique among stored codes; on the rare collision, draw again.
  for (let attempt = 0; attempt < 8; attempt++) {
    const code = generatePairingCode();
    const { handleHash, codeHash } = digests(code);
    const inserted = await db
      .insertInto("host_pairing_code")
      .values({ id: randomUUID(), user_id: userId, handle_hash: handleHash, code_hash: codeHash, expires_at: expiresAt })
      .onConflict((oc) => oc.column("handle_hash").doNothing())
      .returning("id")
      .executeTakeFirst();
    if (inserted) return { code: formatPairingCode(code), expiresAt };
  }
  throw new Error("Could not mint a unique pairing code");
}

/**
 * Exchanges a code for a new device and its token. A wrong code counts a failed attempt against the
 * code its handle names; only the right code learns whether it expired, was used or was voided.
 * Consuming the code and creating the device happen in one transaction, atomically once.
 */
export async function enrollWithCode(db: Kysely<Database>, input: { code: string; name: string; platform: string }): Promise<EnrollOutcome> {
  const parsed = parsePairingCode(input.code);
  if (!parsed) return { ok: false, reason: "invalid" };
  const row = await db
    .selectFrom("host_pairing_code as c")
    .innerJoin("user as u", "u.id", "c.user_id")
    .select(["c.id", "c.user_id", "c.code_hash", "c.failed_attempts", "c.expires_at", "c.used_at", "u.deactivatedAt"])
    .where("c.handle_hash", "=", parsed.handleHash)
    .executeTakeFirst();
  if (!row) return { ok: false, reason: "invalid" };
  if (!secretsEqual(parsed.codeHash, row.code_hash)) {
    await db
      .updateTable("host_pairing_code")
      .set({ failed_attempts: sql`failed_attempts + 1` })
      .where("id", "=", row.id)
      .where("used_at", "is", null)
      .execute();
    return { ok: false, reason: "invalid" };
  }
  if (row.deactivatedAt) return { ok: false, reason: "invalid" };
  if (row.used_at) return { ok: false, reason: "used" };
  if (row.failed_attempts >= MAX_FAILED_ATTEMPTS) return { ok: false, reason: "void" };
  if (row.expires_at.getTime() <= Date.now()) return { ok: false, reason: "expired" };

  return db.transaction().execute(async (trx): Promise<EnrollOutcome> => {
    const claimed = await trx
      .updateTable("host_pairing_code")
      .set({ used_at: new Date() })
      .where("id", "=", row.id)
      .where("used_at", "is", null)
      .where("failed_attempts", "<", MAX_FAILED_ATTEMPTS)
      .where("expires_at", ">", new Date())
      .returning("user_id")
      .executeTakeFirst();
    if (!claimed) return { ok: false, reason: "used" };
    const device = await createDevice(trx, { userId: claimed.user_id, name: input.name, platform: input.platform });
    await trx.updateTable("host_pairing_code").set({ device_id: device.deviceId }).where("id", "=", row.id).execute();
    return { ok: true, ...device, userId: claimed.user_id };
  });
}
