import { sql, type Kysely } from "kysely";
import type { Database } from "../../db/schema.js";

/**
 * The names behind audit credentials (`token:<id>` an API token, `oauth:<client id>` an OAuth client),
 * for pages that say who did something. One query per kind present; a credential since deleted has no
 * name. OAuth clients live in better-auth's `oauthClient` table (migrations/0041), which exists only
 * where the MCP plugin's migrations ran: without it, OAuth credentials stay unnamed.
 */
export async function credentialNames(db: Kysely<Database>, credentials: Iterable<string | null | undefined>): Promise<Map<string, string>> {
  const tokens = new Set<string>();
  const clients = new Set<string>();
  for (const credential of credentials) {
    if (credential?.startsWith("token:")) tokens.add(credential.slice("token:".length));
    else if (credential?.startsWith("oauth:")) clients.add(credential.slice("oauth:".length));
  }
  const names = new Map<string, string>();
  if (tokens.size > 0) {
    const rows = await db
      .selectFrom("api_token")
      .select(["id", "name"])
      .where("id", "in", [...tokens])
      .execute();
    for (const row of rows) names.set(`token:${row.id}`, row.name);
  }
  if (clients.size > 0) {
    const table = await sql<{ found: string | null }>`select to_regclass('"oauthClient"')::text as found`.execute(db);
    if (table.rows[0]?.found) {
      const rows = await sql<{
        clientId: string;
        name: string | null;
      }>`select "clientId", "name" from "oauthClient" where "clientId" in (${sql.join([...clients])})`.execute(db);
      for (const row of rows.rows) if (row.name) names.set(`oauth:${row.clientId}`, row.name);
    }
  }
  return names;
}

/** Who did something, in words: "you, in your browser", "API token “ci”", "OAuth client “Claude”", "the chat assistant". */
export function describeActor(actor: string | null | undefined, credential: string | null | undefined, name: string | null | undefined): string {
  const named = (kind: string) => (name ? `${kind} “${name}”` : `${kind} (since deleted)`);
  if (credential?.startsWith("oauth:")) return named("OAuth client");
  if (credential?.startsWith("token:")) return actor === "mcp" ? `${named("API token")} over MCP` : named("API token");
  switch (actor) {
    case "session":
      return "you, in your browser";
    case "assistant":
      return "the chat assistant";
    case "mcp":
      return "an MCP client";
    case "token":
      return "an API token";
    case "device":
      return "the device";
    default:
      return "someone (not recorded)";
  }
}
