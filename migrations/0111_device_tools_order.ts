import { sql, type Kysely } from "kysely";

/**
 * A device's announced tools keep their schemas' property order (issue 26): `jsonb` stores an object's
 * keys sorted (shortest first), which put read_file's End line before Start line and grep's Pattern after
 * Include and Exclude on the generated forms. `json` keeps the text as sent. Nothing queries inside the
 * column. Rows already stored were sorted; each device's next hello writes its tools again, in order.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_device alter column tools type json using tools::json`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table host_device alter column tools type jsonb using tools::jsonb`.execute(db);
}
