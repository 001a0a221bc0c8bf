import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";

/** The proposals' periodic clean-up (see proposals.ts for their states). */

export interface SweepOptions {
  /** Decided and expired proposals older than this (since they finished) lose their diff, input and result. */
  retentionMs: number;
  /** Rows changed per statement; a sweep stops after `maxBatches` statements of each kind and the next goes on. */
  batchSize?: number;
  maxBatches?: number;
}

export interface SweepOutcome {
  /** Owners of proposals that expired in this sweep (their pages may show them still). */
  expiredFor: string[];
  purged: number;
}

/**
 * The periodic clean-up, safe on every replica at once: pending proposals past their time become
 * expired, and finished ones past the retention lose their diff, input and result (the row, and the
 * audit rows naming it, stay). Each statement changes only rows still in the state it looks for, and
 * skips rows another replica's sweep holds, so two sweeps never do the same row twice. The rows are
 * locked FOR NO KEY UPDATE: an audit row being inserted holds its proposal FOR KEY SHARE, which that
 * does not wait for (FOR UPDATE would, and SKIP LOCKED would then pass the proposal over).
 */
export async function sweep(db: Kysely<Database>, options: SweepOptions): Promise<SweepOutcome> {
  const batchSize = options.batchSize ?? 500;
  const maxBatches = options.maxBatches ?? 20;
  const expiredFor = new Set<string>();
  for (let batch = 0; batch < maxBatches; batch++) {
    const now = new Date();
    const rows = await db
      .updateTable("host_proposal")
      .set({ status: "expired", finished_at: now })
      .where("id", "in", (eb) =>
        eb
          .selectFrom("host_proposal")
          .select("id")
          .where("status", "=", "pending")
          .where("expires_at", "<=", now)
          .limit(batchSize)
          .forNoKeyUpdate()
          .skipLocked(),
      )
      .where("status", "=", "pending")
      .returning("user_id")
      .execute();
    for (const row of rows) expiredFor.add(row.user_id);
    if (rows.length < batchSize) break;
  }
  let purged = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const now = new Date();
    const before = new Date(now.getTime() - options.retentionMs);
    const result = await db
      .updateTable("host_proposal")
      .set({ diff: null, input: null, result: null, purged_at: now })
      .where("id", "in", (eb) =>
        eb
          .selectFrom("host_proposal")
          .select("id")
          .where("purged_at", "is", null)
          .where("finished_at", "is not", null)
          .where("finished_at", "<=", before)
          .limit(batchSize)
          .forNoKeyUpdate()
          .skipLocked(),
      )
      .where("purged_at", "is", null)
      .executeTakeFirst();
    const changed = Number(result.numUpdatedRows);
    purged += changed;
    if (changed < batchSize) break;
  }
  return { expiredFor: [...expiredFor], purged };
}
