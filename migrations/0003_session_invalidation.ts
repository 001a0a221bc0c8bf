import type { Kysely } from "kysely";
import { createNotifyTriggers, dropNotifyTriggers, type NotifyTrigger } from "./notify-triggers.js";

/**
 * Any change to a session, a user or an API token notifies the `tether_auth_invalidate` channel, so
 * every app instance drops what it cached for it, whoever made the change (better-auth, an admin, a
 * cascade, or plain SQL). Payloads: `s:<session token>`, `u:<user id>`, `t:<token hash>`.
 */
const triggers: NotifyTrigger[] = [
  { trigger: "session_invalidate", fn: "tether_notify_session", events: "update or delete", table: `"session"`, prefix: "s:", column: "token" },
  { trigger: "user_invalidate", fn: "tether_notify_user", events: "update or delete", table: `"user"`, prefix: "u:", column: "id" },
  {
    trigger: "api_token_invalidate",
    fn: "tether_notify_api_token",
    events: "update of token_hash, scopes, expires_at, user_id or delete",
    table: "api_token",
    prefix: "t:",
    column: "token_hash",
  },
];

export async function up(db: Kysely<unknown>): Promise<void> {
  await createNotifyTriggers(db, "tether_auth_invalidate", triggers);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await dropNotifyTriggers(db, triggers);
}
