import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";

/** The MCP server's SQL: per-user settings, and re-checking a credential that a stream still holds. */

/** Whether the owner lets MCP clients use action tools (open_path, reveal_in_os). Off until they say so. */
export async function allowsActions(db: Kysely<Database>, userId: string): Promise<boolean> {
  const row = await db.selectFrom("mcp_setting").select("allow_actions").where("user_id", "=", userId).executeTakeFirst();
  return row?.allow_actions === true;
}

export async function setAllowActions(db: Kysely<Database>, userId: string, allow: boolean): Promise<void> {
  await db
    .insertInto("mcp_setting")
    .values({ user_id: userId, allow_actions: allow })
    .onConflict((conflict) => conflict.column("user_id").doUpdateSet({ allow_actions: allow, updated_at: new Date() }))
    .execute();
}

/** The user exists and is not deactivated. */
export async function userActive(db: Kysely<Database>, userId: string): Promise<boolean> {
  const row = await db.selectFrom("user").select("deactivatedAt").where("id", "=", userId).executeTakeFirst();
  return row !== undefined && row.deactivatedAt === null;
}
