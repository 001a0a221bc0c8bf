import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import { BIGINT_MAX, parseWholeNumber, WholeNumberText } from "../../http/whole-number.js";
import { credentialNames } from "./credential-names.js";
import { ACTIVITY_EVENTS, isActivityEvent } from "./events.js";

export const ACTIVITY_PAGE_SIZE = 25;
export const ACTIVITY_MAX_PAGE_SIZE = 100;

/** A page cursor is an entry id: a `bigint` identity, so any larger number is refused before SQL sees it. */
const CURSOR_RANGE = { min: 0, max: BIGINT_MAX };
/** `before=` as the API and pages accept it. */
export const ActivityCursor = WholeNumberText(CURSOR_RANGE);
/** `limit=` as the API accepts it. */
export const ActivityLimit = WholeNumberText({ min: 1, max: ACTIVITY_MAX_PAGE_SIZE });

export interface ActivityQuery {
  /** One user's events; all users' when omitted (site admins only). */
  userId?: string;
  event?: string;
  outcome?: "ok" | "error";
  /** Cursor: only entries older than this id (the `nextCursor` of the previous page). */
  before?: string;
  limit?: number;
}

/** One entry as pages and the JSON API show it. */
export interface ActivityView {
  id: string;
  at: Date;
  event: string;
  /** Human words for the event. */
  label: string;
  actor: string;
  outcome: string;
  errorCode: string | null;
  ipAddress: string | null;
  userAgent: string | null;
  detail: Record<string, unknown> | null;
  user: { id: string; name: string; email: string } | null;
  device: { id: string; name: string } | null;
  tool: string | null;
  /** The credential a call was made with (`token:<id>`, `oauth:<client>`), when one was. */
  credential: string | null;
  /** That credential's name now (an API token's, an OAuth client's); null when there is none, or it was deleted. */
  credentialName: string | null;
}

export interface ActivityPage {
  entries: ActivityView[];
  /** Pass as `before` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

/** Newest first, keyset-paginated by id (stable while new rows arrive). */
export async function listActivity(db: Kysely<Database>, query: ActivityQuery): Promise<ActivityPage> {
  const limit = Math.min(Math.max(query.limit ?? ACTIVITY_PAGE_SIZE, 1), ACTIVITY_MAX_PAGE_SIZE);
  let select = db
    .selectFrom("activity_event as a")
    .leftJoin("user as u", "u.id", "a.user_id")
    .leftJoin("host_device as d", "d.id", "a.device_id")
    .select([
      "a.id",
      "a.at",
      "a.event",
      "a.actor",
      "a.outcome",
      "a.error_code",
      "a.ip_address",
      "a.user_agent",
      "a.detail",
      "a.tool",
      "a.credential",
      "a.user_id",
      "u.name as user_name",
      "u.email as user_email",
      "a.device_id",
      "d.name as device_name",
    ])
    .orderBy("a.id", "desc")
    .limit(limit + 1);
  if (query.userId !== undefined) select = select.where("a.user_id", "=", query.userId);
  if (query.event) select = select.where("a.event", "=", query.event);
  if (query.outcome) select = select.where("a.outcome", "=", query.outcome);
  const before = query.before === undefined ? undefined : parseWholeNumber(query.before, CURSOR_RANGE);
  if (before !== undefined) select = select.where("a.id", "<", String(before));
  const rows = await select.execute();
  const page = rows.slice(0, limit);
  const names = await credentialNames(
    db,
    page.map((row) => row.credential),
  );
  return {
    entries: page.map((row) => ({
      id: String(row.id),
      at: row.at,
      event: row.event,
      label: isActivityEvent(row.event) ? ACTIVITY_EVENTS[row.event] : row.event,
      actor: row.actor,
      outcome: row.outcome,
      errorCode: row.error_code,
      ipAddress: row.ip_address,
      userAgent: row.user_agent,
      detail: row.detail,
      user: row.user_id && row.user_name !== null && row.user_email !== null ? { id: row.user_id, name: row.user_name, email: row.user_email } : null,
      device: row.device_id && row.device_name !== null ? { id: row.device_id, name: row.device_name } : null,
      tool: row.tool,
      credential: row.credential,
      credentialName: row.credential ? (names.get(row.credential) ?? null) : null,
    })),
    nextCursor: rows.length > limit ? String(page[page.length - 1]!.id) : null,
  };
}
