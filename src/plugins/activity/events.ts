/**
 * The security events of the one audit log (table `activity_event`): the host's own (pairing, calls,
 * proposals) and the account's (sign-ins, password and two-factor changes, tokens, sessions, OAuth
 * clients allowed and revoked).
 * Labels are what the activity pages show.
 */
export const ACTIVITY_EVENTS = {
  "sign-up": "Account created",
  "sign-in": "Signed in",
  "sign-in.failed": "Failed sign-in",
  "sign-in.locked": "Sign-in refused: too many failed attempts",
  "password.change": "Password changed",
  "password.reset": "Password reset",
  "two-factor.enable": "Two-factor turned on",
  "two-factor.disable": "Two-factor turned off",
  "passkey.add": "Passkey added",
  "passkey.remove": "Passkey removed",
  "session.revoke": "Session signed out",
  "session.revoke-others": "Other sessions signed out",
  "session.revoke-all": "Every session signed out",
  "token.create": "API token created",
  "token.revoke": "API token revoked",
  "oauth.consent": "OAuth client allowed",
  "oauth.revoke": "OAuth client's access revoked",
  pair: "Device paired",
  enroll: "Device enrolled",
  revoke: "Device revoked",
  call: "Tool call",
  propose: "Change proposed",
  approve: "Proposal approved",
  apply: "Proposal applied",
  reject: "Proposal rejected",
} as const;

export type ActivityEvent = keyof typeof ACTIVITY_EVENTS;
export const ACTIVITY_EVENT_NAMES = Object.keys(ACTIVITY_EVENTS) as ActivityEvent[];

export function isActivityEvent(name: string): name is ActivityEvent {
  return Object.hasOwn(ACTIVITY_EVENTS, name);
}

/**
 * Who acted: the signed-in browser, an API token, the chat assistant, the device itself, a visitor
 * who is not signed in (sign-in attempts), or a site admin acting on someone's account.
 */
export type ActivityActor = "session" | "token" | "assistant" | "device" | "visitor" | "admin";

/** One row to write. Never a secret: no password, code, token value or session token. */
export interface ActivityEntry {
  /** Null only for a failed sign-in naming no account. */
  userId: string | null;
  event: ActivityEvent;
  actor: ActivityActor;
  outcome: "ok" | "error";
  errorCode?: string | null;
  ipAddress?: string | null;
  userAgent?: string | null;
  /**
   * Small non-secret facts: the sign-in method, a token's name, the address a failed sign-in named, an
   * OAuth client's name (`client`) and why its access ended (`reason`).
   */
  detail?: Record<string, string | number | boolean> | null;
}
