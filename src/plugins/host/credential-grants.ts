import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import { HttpError } from "../../http/errors.js";

/**
 * Which devices a credential may touch. `undefined`: every device of its owner (no grant stored: a
 * credential made before grants existed, or made without choosing). A list: those devices only; a
 * device revoked since stays in the list and matches nothing, so the grant can shrink to no device but
 * never widen to all of them.
 */
export type DeviceGrant = readonly string[] | undefined;

/** How many devices one grant may name. */
export const MAX_GRANTED_DEVICES = 100;

/** The credential key grants are stored under: an API token by its id, an OAuth client per user by its client id. */
export const tokenCredential = (tokenId: string) => `token:${tokenId}`;
export const oauthCredential = (clientId: string) => `oauth:${clientId}`;

/** Whether `grant` lets its credential touch `deviceId`: the one check every path makes. */
export function grantAllows(grant: DeviceGrant, deviceId: string): boolean {
  return grant === undefined || grant.includes(deviceId);
}

/** The grant stored for one credential of `userId`; undefined when none (all devices). */
export async function deviceGrantOf(db: Kysely<Database>, userId: string, credential: string): Promise<DeviceGrant> {
  const row = await db
    .selectFrom("host_device_grant")
    .select("device_ids")
    .where("user_id", "=", userId)
    .where("credential", "=", credential)
    .executeTakeFirst();
  return row ? parseIds(row.device_ids) : undefined;
}

/** The grants of several credentials at once (the token list shows them), keyed by credential. */
export async function deviceGrantsOf(db: Kysely<Database>, userId: string, credentials: readonly string[]): Promise<Map<string, string[]>> {
  if (credentials.length === 0) return new Map();
  const rows = await db
    .selectFrom("host_device_grant")
    .select(["credential", "device_ids"])
    .where("user_id", "=", userId)
    .where("credential", "in", credentials)
    .execute();
  return new Map(rows.map((row) => [row.credential, parseIds(row.device_ids)]));
}

/** Stores a credential's grant; `undefined` removes it (all devices). Replaces what was there (a new consent). */
export async function setDeviceGrant(db: Kysely<Database>, userId: string, credential: string, grant: DeviceGrant): Promise<void> {
  if (grant === undefined) {
    await db.deleteFrom("host_device_grant").where("user_id", "=", userId).where("credential", "=", credential).execute();
    return;
  }
  const deviceIds = JSON.stringify([...new Set(grant)]);
  await db
    .insertInto("host_device_grant")
    .values({ user_id: userId, credential, device_ids: deviceIds })
    .onConflict((conflict) => conflict.columns(["user_id", "credential"]).doUpdateSet({ device_ids: deviceIds, created_at: new Date() }))
    .execute();
}

/**
 * Checks devices a person chose for a grant: each must be one of `userId`'s unrevoked devices. Another
 * user's device and an id that names nothing are refused alike (400 UNKNOWN_DEVICE), so the answer says
 * nothing of other accounts.
 */
export async function checkGrantableDevices(db: Kysely<Database>, userId: string, deviceIds: readonly string[]): Promise<string[]> {
  const wanted = [...new Set(deviceIds)];
  if (wanted.length > MAX_GRANTED_DEVICES) throw new HttpError(400, "INVALID_INPUT", `A credential can be limited to at most ${MAX_GRANTED_DEVICES} devices`);
  if (wanted.length === 0) return wanted;
  const rows = await db
    .selectFrom("host_device")
    .select("id")
    .where("user_id", "=", userId)
    .where("revoked_at", "is", null)
    .where("id", "in", wanted)
    .execute();
  const owned = new Set(rows.map((row) => row.id));
  const unknown = wanted.filter((id) => !owned.has(id));
  if (unknown.length > 0) throw new HttpError(400, "UNKNOWN_DEVICE", `You have no device with the id ${JSON.stringify(unknown[0]!.slice(0, 100))}`);
  return wanted;
}

/** jsonb comes back parsed from PostgreSQL and PGlite alike; a string is parsed defensively. */
function parseIds(value: unknown): string[] {
  const list = typeof value === "string" ? (JSON.parse(value) as unknown) : value;
  return Array.isArray(list) ? list.filter((id): id is string => typeof id === "string") : [];
}

/** Reads and writes grants; an API token's grant never changes after it is minted, so it is remembered. */
export interface GrantStore {
  grantOf(userId: string, credential: string): Promise<DeviceGrant>;
  set(userId: string, credential: string, grant: DeviceGrant): Promise<void>;
}

/** How many API tokens' grants one process remembers (a full map is cleared, not evicted one by one). */
const REMEMBERED_TOKEN_GRANTS = 10_000;

export function createGrantStore(db: Kysely<Database>): GrantStore {
  // Only tokens: a token's grant is stored before its value leaves the server and never edited (a revoked
  // token fails verification first). An OAuth client's grant changes with each consent, so it is read each time.
  const tokens = new Map<string, { grant: DeviceGrant }>();
  return {
    async grantOf(userId, credential) {
      if (!credential.startsWith("token:")) return deviceGrantOf(db, userId, credential);
      const key = `${userId} ${credential}`;
      const known = tokens.get(key);
      if (known) return known.grant;
      const grant = await deviceGrantOf(db, userId, credential);
      if (tokens.size >= REMEMBERED_TOKEN_GRANTS) tokens.clear();
      tokens.set(key, { grant });
      return grant;
    },
    async set(userId, credential, grant) {
      tokens.delete(`${userId} ${credential}`);
      await setDeviceGrant(db, userId, credential, grant);
    },
  };
}
