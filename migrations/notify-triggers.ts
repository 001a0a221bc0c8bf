import { sql, type Kysely } from "kysely";

/** A row trigger that NOTIFYs an invalidation channel with `<prefix>` and a column of the old row. */
export interface NotifyTrigger {
  trigger: string;
  /** The trigger function's name. */
  fn: string;
  /** When it fires, as SQL: `update or delete`, `update of a, b or delete`. */
  events: string;
  /** The table, as SQL (quoted where it must be). */
  table: string;
  prefix: string;
  column: string;
}

/**
 * Creates the functions, then the triggers, in the order given. The statements are, to the byte, what
 * migrations 0003 and 0030 always sent, so a database migrated by an older release holds the same
 * definitions as a new one.
 */
export async function createNotifyTriggers(db: Kysely<unknown>, channel: string, triggers: readonly NotifyTrigger[]): Promise<void> {
  for (const { fn, prefix, column } of triggers) {
    await sql
      .raw(
        `create function ${fn}() returns trigger language plpgsql as $$
    begin
      perform pg_notify('${channel}', '${prefix}' || old.${column});
      return null;
    end $$`,
      )
      .execute(db);
  }
  for (const { trigger, events, table, fn } of triggers) {
    await sql.raw(`create trigger ${trigger} after ${events} on ${table}\n    for each row execute function ${fn}()`).execute(db);
  }
}

/** Drops what `createNotifyTriggers` made, in reverse order. */
export async function dropNotifyTriggers(db: Kysely<unknown>, triggers: readonly NotifyTrigger[]): Promise<void> {
  const reversed = [...triggers].reverse();
  for (const { trigger, table } of reversed) await sql.raw(`drop trigger if exists ${trigger} on ${table}`).execute(db);
  for (const { fn } of reversed) await sql.raw(`drop function if exists ${fn}()`).execute(db);
}
