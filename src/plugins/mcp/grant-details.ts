import { sql, type Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import type { McpGrant } from "./oauth.js";

/**
 * What tells two OAuth clients of the same name apart on /settings/mcp: the client id, where it redirects
 * (the host of its registered redirect URIs), when it registered, and when it was last used (its latest
 * recorded call with this user's grant, or its latest token, whichever is later).
 */
export interface GrantDetails extends McpGrant {
  redirectHosts: string[];
  registeredAt: Date | null;
  lastUsedAt: Date | null;
}

function hostOf(uri: unknown): string | undefined {
  try {
    return new URL(String(uri)).host || undefined;
  } catch {
    return undefined;
  }
}

/** A jsonb list, whether the driver parsed it or left it as JSON text. */
function listOf(value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  if (typeof value !== "string") return [];
  try {
    const parsed: unknown = JSON.parse(value);
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    return [];
  }
}

const toDate = (value: unknown): Date | null => (value === null || value === undefined ? null : new Date(value as string | Date));
const later = (a: Date | null, b: Date | null) => (a && b ? (a > b ? a : b) : (a ?? b));

export async function grantDetails(db: Kysely<Database>, userId: string, grants: McpGrant[]): Promise<GrantDetails[]> {
  if (grants.length === 0) return [];
  const ids = grants.map((grant) => grant.clientId);
  const [clients, tokens, calls] = await Promise.all([
    sql<{ clientId: string; redirectUris: unknown; createdAt: unknown }>`
      select "clientId", "redirectUris", "createdAt" from "oauthClient" where "clientId" in (${sql.join(ids)})`.execute(db),
    sql<{ clientId: string; last: unknown }>`
      select "clientId", max("createdAt") as last from "oauthAccessToken"
      where "userId" = ${userId} and "clientId" in (${sql.join(ids)}) group by "clientId"`.execute(db),
    db
      .selectFrom("activity_event")
      .select((eb) => ["credential", eb.fn.max("at").as("last")])
      .where("user_id", "=", userId)
      .where(
        "credential",
        "in",
        ids.map((id) => `oauth:${id}`),
      )
      .groupBy("credential")
      .execute(),
  ]);
  const client = new Map(clients.rows.map((row) => [row.clientId, row]));
  const tokenUse = new Map(tokens.rows.map((row) => [row.clientId, toDate(row.last)]));
  const callUse = new Map(calls.map((row) => [String(row.credential).slice("oauth:".length), toDate(row.last)]));
  return grants.map((grant) => {
    const registration = client.get(grant.clientId);
    const uris = listOf(registration?.redirectUris);
    return {
      ...grant,
      redirectHosts: [...new Set(uris.map(hostOf).filter((host): host is string => host !== undefined))],
      registeredAt: toDate(registration?.createdAt),
      lastUsedAt: later(tokenUse.get(grant.clientId) ?? null, callUse.get(grant.clientId) ?? null),
    };
  });
}

/**
 * Copy-paste configuration for MCP clients, with this server's address filled in: an HTTP transport entry for
 * clients that take a URL (they sign in with OAuth), an `mcp-remote` entry for clients that only start stdio
 * servers, and Claude Code's one-line command.
 */
export function clientConfigurations(endpoint: string): { id: string; label: string; text: string }[] {
  const url = new URL(endpoint);
  const plainHttpElsewhere = url.protocol === "http:" && !["localhost", "127.0.0.1", "[::1]"].includes(url.hostname);
  const http = { mcpServers: { tether: { type: "http", url: endpoint } } };
  const remote = { mcpServers: { tether: { command: "npx", args: ["-y", "mcp-remote", endpoint, ...(plainHttpElsewhere ? ["--allow-http"] : [])] } } };
  return [
    { id: "mcp-config-http", label: "Clients that take a URL (HTTP transport: Claude Code, Cursor, VS Code, Windsurf)", text: JSON.stringify(http, null, 2) },
    {
      id: "mcp-config-stdio",
      label: "Clients that only start local servers (stdio, through mcp-remote: Claude Desktop and others)",
      text: JSON.stringify(remote, null, 2),
    },
    { id: "mcp-config-claude-code", label: "Claude Code, in a terminal", text: `claude mcp add --transport http tether ${endpoint}` },
  ];
}
