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

/** The token still exists, has not expired, and its user is not deactivated. */
export async function apiTokenStillValid(db: Kysely<Database>, userId: string, tokenId: string): Promise<boolean> {
  const row = await db
    .selectFrom("api_token as t")
    .innerJoin("user as u", "u.id", "t.user_id")
    .select(["t.expires_at", "u.deactivatedAt"])
    .where("t.id", "=", tokenId)
    .where("t.user_id", "=", userId)
    .executeTakeFirst();
  return row !== undefined && row.deactivatedAt === null && (row.expires_at === null || new Date(row.expires_at).getTime() > Date.now());
}

/** The user exists and is not deactivated. */
export async function userActive(db: Kysely<Database>, userId: string): Promise<boolean> {
  const row = await db.selectFrom("user").select("deactivatedAt").where("id", "=", userId).executeTakeFirst();
  return row !== undefined && row.deactivatedAt === null;
}
