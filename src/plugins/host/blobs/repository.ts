import { sql, type Kysely } from "kysely";
import type { Database } from "../../../db/schema.js";

/** The blob rows (migrations/0120_blobs.ts): small typed functions taking `db` first. */

export interface BlobRecord {
  id: string;
  userId: string;
  deviceId: string | null;
  path: string | null;
  size: number;
  digest: string;
  contentType: string;
  createdAt: Date;
  expiresAt: Date;
  complete: boolean;
}

/** A blob about to be made: its record without what the database fills in. */
export type NewBlob = Omit<BlobRecord, "createdAt" | "complete">;

const columns = ["id", "user_id", "device_id", "path", "size", "digest", "content_type", "created_at", "expires_at", "completed_at"] as const;

type Row = {
  id: string;
  user_id: string;
  device_id: string | null;
  path: string | null;
  size: string | number;
  digest: string;
  content_type: string;
  created_at: Date;
  expires_at: Date;
  completed_at: Date | null;
};

function toRecord(row: Row): BlobRecord {
  return {
    id: row.id,
    userId: row.user_id,
    deviceId: row.device_id,
    path: row.path,
    // bigint: a string from node-postgres, a number from PGlite; blobs stay far below 2^53.
    size: Number(row.size),
    digest: row.digest,
    contentType: row.content_type,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    complete: row.completed_at !== null,
  };
}

/**
 * Inserts the blob if the owner's blobs (complete or not: an upload under way holds its room) plus this
 * one stay within `quotaBytes`, in one statement so two concurrent inserts cannot both squeeze in past
 * the quota by more than one blob. False when over the quota.
 */
export async function insertWithinQuota(db: Kysely<Database>, blob: NewBlob, quotaBytes: number): Promise<boolean> {
  const result = await sql<{ id: string }>`
    insert into host_blob (id, user_id, device_id, path, size, digest, content_type, expires_at)
    select ${blob.id}, ${blob.userId}, ${blob.deviceId}, ${blob.path}, ${blob.size}, ${blob.digest}, ${blob.contentType}, ${blob.expiresAt}
    where (select coalesce(sum(size), 0) from host_blob where user_id = ${blob.userId} and expires_at > now()) + ${blob.size} <= ${quotaBytes}
    returning id`.execute(db);
  return result.rows.length === 1;
}

export async function findBlob(db: Kysely<Database>, id: string): Promise<BlobRecord | undefined> {
  const row = await db.selectFrom("host_blob").select(columns).where("id", "=", id).executeTakeFirst();
  return row ? toRecord(row) : undefined;
}

/** Bytes the owner's unexpired blobs take (or reserve). */
export async function usage(db: Kysely<Database>, userId: string): Promise<number> {
  const row = await db
    .selectFrom("host_blob")
    .select((eb) => eb.fn.coalesce(eb.fn.sum<string | number>("size"), sql<number>`0`).as("bytes"))
    .where("user_id", "=", userId)
    .where("expires_at", ">", new Date())
    .executeTakeFirstOrThrow();
  return Number(row.bytes);
}

/** A fresh upload URL's nonce: the previous URL (a failed attempt's) stops working. Only while incomplete. */
export async function setUploadNonce(db: Kysely<Database>, id: string, nonce: string): Promise<boolean> {
  const result = await db.updateTable("host_blob").set({ upload_nonce: nonce }).where("id", "=", id).where("completed_at", "is", null).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Takes the upload URL with this nonce, once: true for the first upload to use it, false for any other. */
export async function claimUpload(db: Kysely<Database>, id: string, nonce: string): Promise<boolean> {
  const result = await db
    .updateTable("host_blob")
    .set({ upload_nonce: null })
    .where("id", "=", id)
    .where("upload_nonce", "=", nonce)
    .where("completed_at", "is", null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function markComplete(db: Kysely<Database>, id: string): Promise<void> {
  await db.updateTable("host_blob").set({ completed_at: new Date() }).where("id", "=", id).execute();
}

export async function deleteBlob(db: Kysely<Database>, id: string): Promise<void> {
  await db.deleteFrom("host_blob").where("id", "=", id).execute();
}

/**
 * Removes, in batches, the rows past their expiry and those of revoked devices or deactivated owners
 * (deleted devices and users take theirs by cascade); returns their ids so their bytes can go too.
 */
export async function deleteStale(db: Kysely<Database>, batchSize = 500): Promise<string[]> {
  const rows = await db
    .deleteFrom("host_blob")
    .where("id", "in", (eb) =>
      eb
        .selectFrom("host_blob as b")
        .leftJoin("host_device as d", "d.id", "b.device_id")
        .innerJoin("user as u", "u.id", "b.user_id")
        .select("b.id")
        .where((w) => w.or([w("b.expires_at", "<=", new Date()), w("d.revoked_at", "is not", null), w("u.deactivatedAt", "is not", null)]))
        .limit(batchSize),
    )
    .returning("id")
    .execute();
  return rows.map((row) => row.id);
}

/** Of `ids`, those that still have a row (the sweep keeps their bytes). */
export async function existing(db: Kysely<Database>, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db.selectFrom("host_blob").select("id").where("id", "in", ids).execute();
  return new Set(rows.map((row) => row.id));
}

/** A device's blobs, when it is revoked: their rows go now, their bytes with them. */
export async function deleteForDevice(db: Kysely<Database>, deviceId: string): Promise<string[]> {
  const rows = await db.deleteFrom("host_blob").where("device_id", "=", deviceId).returning("id").execute();
  return rows.map((row) => row.id);
}
