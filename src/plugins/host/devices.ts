import { randomUUID } from "node:crypto";
import type { Kysely, Transaction } from "kysely";
import { createCredentialVerifier, LastUsedThrottle } from "../../crypto/credential-verifier.js";
import { generateSecret, hashSecret } from "../../crypto/secrets.js";
import type { Database, HostDeviceRow } from "../../db/schema.js";
import { camelColumns } from "../../db/camel-columns.js";
import { storedUpdateReport, type StoredUpdateReport } from "./device-updates.js";
import { DEVICE_TOKEN_PREFIX, type AnnouncedTool } from "../../protocol/index.js";

/** The device registry: SQL behind small typed functions. A device row is also its credential. */

const TOKEN_SHAPE = /^dt_[A-Za-z0-9_-]{43}$/;
/** last_seen_at is written at most this often per device outside connect and disconnect. */
const SEEN_WRITE_INTERVAL_MS = 30_000;

export interface DeviceIdentity {
  id: string;
  userId: string;
  name: string;
}

/**
 * Where verified device tokens may be remembered (the host plugin's `DeviceCache`, kept correct by
 * notifications), declared here because the registry owns what the cache holds.
 */
export interface DeviceTokenCache {
  readonly version: number;
  deviceByTokenHash(hash: string): DeviceIdentity | undefined;
  storeToken(hash: string, identity: DeviceIdentity, version: number): void;
}

export type TokenVerdict = { ok: true; device: DeviceIdentity } | { ok: false; reason: "invalid" | "revoked" };

/** A device as its owner sees it (never the token digest). */
export interface DeviceSummary {
  id: string;
  name: string;
  platform: string;
  agent: string | null;
  tools: AnnouncedTool[];
  roots: string[];
  createdAt: Date;
  lastSeenAt: Date | null;
  /** Paired and not yet confirmed by its owner on /devices (`acknowledgeDevice`). */
  isNew: boolean;
  /** The last update it reported (see device-updates.ts). */
  lastUpdate: StoredUpdateReport | null;
}

/** A device as its owner sees it, with whether its stream is connected now (the dispatcher's presence). */
export interface DeviceView extends DeviceSummary {
  online: boolean;
}

export async function createDevice(
  db: Kysely<Database> | Transaction<Database>,
  input: { userId: string; name: string; platform: string },
): Promise<{ deviceId: string; token: string }> {
  const token = generateSecret(DEVICE_TOKEN_PREFIX, 32);
  const deviceId = randomUUID();
  await db
    .insertInto("host_device")
    .values({ id: deviceId, user_id: input.userId, name: input.name, platform: input.platform, token_hash: hashSecret(token) })
    .execute();
  return { deviceId, token };
}

/**
 * The verifier of `dt_…` values, on the one credential verifier (src/crypto/credential-verifier.ts): one
 * indexed lookup by the token's digest, joined to the owner, or none when `cache` knows the token (see
 * device-cache.ts). A revoked device, or one whose owner is deactivated, does not verify; revoked is
 * reported as such so the device can say "pair again".
 */
export function createDeviceTokenVerifier(db: Kysely<Database>, cache?: DeviceTokenCache): (token: string) => Promise<TokenVerdict> {
  const verify = createCredentialVerifier(
    {
      shape: TOKEN_SHAPE,
      find: async (hash) => {
        const row = await db
          .selectFrom("host_device as d")
          .innerJoin("user as u", "u.id", "d.user_id")
          .select(["d.id", "d.user_id", "d.name", "d.revoked_at", "u.deactivatedAt"])
          .where("d.token_hash", "=", hash)
          .executeTakeFirst();
        return row ? { id: row.id, userId: row.user_id, name: row.name, revoked: Boolean(row.revoked_at || row.deactivatedAt) } : null;
      },
      refusal: (device: DeviceIdentity & { revoked?: boolean }) => (device.revoked ? "revoked" : null),
    },
    cache && {
      get version() {
        return cache.version;
      },
      get: (hash) => cache.deviceByTokenHash(hash),
      store: (hash, { id, userId, name }, version) => cache.storeToken(hash, { id, userId, name }, version),
    },
  );
  return async (token) => {
    const verdict = await verify(token);
    if (!verdict.ok) return verdict;
    const { id, userId, name } = verdict.credential;
    return { ok: true, device: { id, userId, name } };
  };
}

/** `createDeviceTokenVerifier`'s verdict for one token, building the verifier each time (tests, one-off checks). */
export function verifyDeviceToken(db: Kysely<Database>, token: string, cache?: DeviceTokenCache): Promise<TokenVerdict> {
  return createDeviceTokenVerifier(db, cache)(token);
}

export async function recordHello(
  db: Kysely<Database>,
  deviceId: string,
  hello: { tools: AnnouncedTool[]; roots: string[]; agent: string | null },
): Promise<void> {
  await db
    .updateTable("host_device")
    .set({ tools: JSON.stringify(hello.tools), roots: JSON.stringify(hello.roots), agent: hello.agent, last_seen_at: new Date() })
    .where("id", "=", deviceId)
    .execute();
}

/** The tools the device announced at its last hello; null if it never said hello. */
export async function announcedTools(db: Kysely<Database>, deviceId: string): Promise<AnnouncedTool[] | null> {
  const row = await db.selectFrom("host_device").select("tools").where("id", "=", deviceId).executeTakeFirst();
  return (row?.tools as AnnouncedTool[] | null | undefined) ?? null;
}

const lastSeen = new LastUsedThrottle(SEEN_WRITE_INTERVAL_MS);

/** Records that the device was heard from; `force` for connect and disconnect, else throttled. */
export async function touchDevice(db: Kysely<Database>, deviceId: string, force = false): Promise<void> {
  const now = Date.now();
  if (force) lastSeen.written(deviceId, now);
  else if (!lastSeen.due(deviceId, now)) return;
  await db
    .updateTable("host_device")
    .set({ last_seen_at: new Date(now) })
    .where("id", "=", deviceId)
    .execute();
}

/** The owner's devices that are not revoked, newest first. */
export async function listDevices(db: Kysely<Database>, userId: string): Promise<DeviceSummary[]> {
  const rows = await db
    .selectFrom("host_device")
    .selectAll()
    .where("user_id", "=", userId)
    .where("revoked_at", "is", null)
    .orderBy("created_at", "desc")
    .execute();
  return rows.map(toSummary);
}

/** One of the owner's devices (not revoked), or undefined: someone else's device is not found. */
export async function findDevice(db: Kysely<Database>, userId: string, deviceId: string): Promise<DeviceSummary | undefined> {
  const row = await db
    .selectFrom("host_device")
    .selectAll()
    .where("id", "=", deviceId)
    .where("user_id", "=", userId)
    .where("revoked_at", "is", null)
    .executeTakeFirst();
  return row ? toSummary(row) : undefined;
}

/** Revokes one of the owner's devices; false when the owner has no such (unrevoked) device. */
export async function revokeDevice(db: Kysely<Database>, userId: string, deviceId: string): Promise<boolean> {
  const result = await db
    .updateTable("host_device")
    .set({ revoked_at: new Date() })
    .where("id", "=", deviceId)
    .where("user_id", "=", userId)
    .where("revoked_at", "is", null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** The owner has seen the device and says it is theirs: it is no longer new. False when they have no such device. */
export async function acknowledgeDevice(db: Kysely<Database>, userId: string, deviceId: string): Promise<boolean> {
  const result = await db
    .updateTable("host_device")
    .set((eb) => ({ acknowledged_at: eb.fn.coalesce("acknowledged_at", eb.val(new Date())) }))
    .where("id", "=", deviceId)
    .where("user_id", "=", userId)
    .where("revoked_at", "is", null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

function toSummary(row: HostDeviceRow): DeviceSummary {
  const summary = camelColumns(row, ["id", "name", "platform", "agent", "tools", "roots", "created_at", "last_seen_at"]);
  return {
    ...summary,
    tools: (row.tools as AnnouncedTool[] | null) ?? [],
    roots: row.roots ?? [],
    isNew: row.acknowledged_at === null,
    lastUpdate: storedUpdateReport(row.last_update),
  };
}
