import type { Kysely } from "kysely";
import { UAParser } from "ua-parser-js";
import type { Database } from "../../db/schema.js";

/** One of a user's live sessions as the sessions pages show it (never its token). */
export interface SessionListing {
  id: string;
  browser: string;
  os: string;
  ipAddress: string | null;
  createdAt: Date;
  /** When better-auth last extended it (at most once a day: see SESSION_UPDATE_AGE_SECONDS). */
  lastActiveAt: Date;
  current: boolean;
}

/** "Chrome 130", "Firefox", or "Unknown browser" from a user agent. */
export function describeUserAgent(userAgent: string | null): { browser: string; os: string } {
  if (!userAgent) return { browser: "Unknown browser", os: "Unknown system" };
  const { browser, os } = new UAParser(userAgent).getResult();
  const major = browser.version?.split(".")[0];
  return {
    browser: browser.name ? `${browser.name}${major ? ` ${major}` : ""}` : "Unknown browser",
    os: os.name ? `${os.name}${os.version ? ` ${os.version}` : ""}` : "Unknown system",
  };
}

/** The user's unexpired sessions, most recently active first; `currentId` marks this one. */
export async function listUserSessions(db: Kysely<Database>, userId: string, currentId: string | null): Promise<SessionListing[]> {
  const rows = await db
    .selectFrom("session")
    .select(["id", "userAgent", "ipAddress", "createdAt", "updatedAt"])
    .where("userId", "=", userId)
    .where("expiresAt", ">", new Date())
    .orderBy("updatedAt", "desc")
    .execute();
  return rows.map((row) => ({
    id: row.id,
    ...describeUserAgent(row.userAgent),
    ipAddress: row.ipAddress,
    createdAt: row.createdAt,
    lastActiveAt: row.updatedAt,
    current: row.id === currentId,
  }));
}

/** The token of one of the user's sessions (for better-auth's revoke endpoint), or undefined. */
export async function sessionTokenOf(db: Kysely<Database>, userId: string, sessionId: string): Promise<string | undefined> {
  const row = await db.selectFrom("session").select("token").where("id", "=", sessionId).where("userId", "=", userId).executeTakeFirst();
  return row?.token;
}
