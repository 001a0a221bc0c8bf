import type { ColumnType, Generated, Insertable, Selectable } from "kysely";

/**
 * The one Kysely `Database` interface. better-auth owns the shape of `user`, `session`, `account`
 * and `verification` (its column names are camelCase); Tether's own tables are snake_case.
 */
export interface Database {
  user: UserTable;
  session: SessionTable;
  account: AccountTable;
  verification: VerificationTable;
  api_token: ApiTokenTable;
  host_device: HostDeviceTable;
  host_pairing_code: HostPairingCodeTable;
  host_proposal: HostProposalTable;
  activity_event: ActivityEventTable;
  host_blob: HostBlobTable;
  twoFactor: TwoFactorTable;
  passkey: PasskeyTable;
  mcp_setting: McpSettingTable;
  host_device_grant: HostDeviceGrantTable;
  mcp_task: McpTaskTable;
  mcp_url_elicitation: McpUrlElicitationTable;
}

type Timestamp = ColumnType<Date, Date | string, Date | string>;

export interface UserTable {
  id: string;
  name: string;
  email: string;
  emailVerified: boolean;
  image: string | null;
  createdAt: Timestamp;
  updatedAt: Timestamp;
  isSiteAdmin: ColumnType<boolean, boolean | undefined, boolean>;
  deactivatedAt: Timestamp | null;
  twoFactorEnabled: ColumnType<boolean | null, boolean | undefined, boolean>;
}

export interface SessionTable {
  id: string;
  expiresAt: Timestamp;
  token: string;
  createdAt: Timestamp;
  updatedAt: Timestamp;
  ipAddress: string | null;
  userAgent: string | null;
  userId: string;
}

export interface AccountTable {
  id: string;
  accountId: string;
  providerId: string;
  userId: string;
  accessToken: string | null;
  refreshToken: string | null;
  idToken: string | null;
  accessTokenExpiresAt: Timestamp | null;
  refreshTokenExpiresAt: Timestamp | null;
  scope: string | null;
  password: string | null;
  createdAt: Timestamp;
  updatedAt: Timestamp;
}

export interface VerificationTable {
  id: string;
  identifier: string;
  value: string;
  expiresAt: Timestamp;
  createdAt: Timestamp;
  updatedAt: Timestamp;
}

export interface ApiTokenTable {
  id: string;
  user_id: string;
  name: string;
  /** SHA-256 of the whole `sk_…` value; the value itself is never stored. */
  token_hash: string;
  /** The first characters of the value, shown in lists so a user can tell tokens apart. */
  prefix: string;
  scopes: ColumnType<string[], string, string>;
  created_at: Generated<Date>;
  last_used_at: Date | null;
  expires_at: Date | null;
}

export type UserRow = Selectable<UserTable>;

/** Every column of a user (aliased `u`), as better-auth returns a user: for joins that resolve one. */
export const USER_COLUMNS = [
  "u.id",
  "u.name",
  "u.email",
  "u.emailVerified",
  "u.image",
  "u.createdAt",
  "u.updatedAt",
  "u.isSiteAdmin",
  "u.deactivatedAt",
  "u.twoFactorEnabled",
] as const;
export type SessionRow = Selectable<SessionTable>;
export type ApiTokenRow = Selectable<ApiTokenTable>;
export type NewApiToken = Insertable<ApiTokenTable>;

/** Device host connector (migrations/0004_host.ts). */
export interface HostDeviceTable {
  id: string;
  user_id: string;
  name: string;
  platform: string;
  /** SHA-256 of the device's bearer token; the token itself is never stored. */
  token_hash: string;
  /** The tools the device announced at its last hello (name, description, input schema, class). */
  tools: ColumnType<unknown[] | null, string | null | undefined, string | null>;
  roots: ColumnType<string[] | null, string | null | undefined, string | null>;
  agent: string | null;
  created_at: Generated<Date>;
  last_seen_at: Date | null;
  revoked_at: Date | null;
  /** When the owner confirmed the device on /devices; null while it is new (migrations/0071). */
  acknowledged_at: Date | null;
  /** The last update the device reported (migration 0073): `StoredUpdateReport` in src/plugins/host/device-updates.ts. */
  last_update: ColumnType<unknown, string | null | undefined, string | null>;
}

export interface HostPairingCodeTable {
  id: string;
  user_id: string;
  handle_hash: string;
  code_hash: string;
  failed_attempts: Generated<number>;
  created_at: Generated<Date>;
  expires_at: Date;
  used_at: Date | null;
  device_id: string | null;
}

export type HostProposalStatus = "pending" | "applying" | "applied" | "failed" | "rejected" | "expired";

export interface HostProposalTable {
  id: string;
  user_id: string;
  device_id: string;
  tool: string;
  /** Null once purged (migrations/0070_proposal_retention.ts), as are `diff` and `result`. */
  input: ColumnType<unknown, string, string | null>;
  diff: string | null;
  summary: string;
  diff_bytes: number | null;
  diff_lines: number | null;
  purged_at: Date | null;
  status: ColumnType<HostProposalStatus, HostProposalStatus | undefined, HostProposalStatus>;
  created_at: Generated<Date>;
  expires_at: Date;
  decided_at: Date | null;
  finished_at: Date | null;
  result: ColumnType<unknown, string | null | undefined, string | null>;
  error_code: string | null;
  error_message: string | null;
  /** Who proposed it (migrations/0110): the audit actor, its credential, and that credential's name then. */
  proposer_actor: ColumnType<string | null, string | null | undefined, string | null>;
  proposer_credential: ColumnType<string | null, string | null | undefined, string | null>;
  proposer_name: ColumnType<string | null, string | null | undefined, string | null>;
  /** The actor that approved or rejected it; null while pending, and when it expired. */
  decided_by: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Blobs (migrations/0120_blobs.ts): the bytes are in the blob store, this is what the server knows of them. */
export interface HostBlobTable {
  id: string;
  user_id: string;
  /** The device the bytes come from (a read's handle); null for a caller's upload. */
  device_id: string | null;
  /** The file on the device, as the device resolved it when the handle was made. */
  path: string | null;
  /** bigint: PostgreSQL's driver answers a string, PGlite a number (see blobs/repository.ts). */
  size: ColumnType<string | number, number, number>;
  /** sha256, hex. */
  digest: string;
  content_type: string;
  created_at: Generated<Date>;
  expires_at: Date;
  completed_at: Date | null;
  upload_nonce: string | null;
}

export interface ActivityEventTable {
  id: Generated<string>;
  /** Null only for a failed sign-in naming no account (migrations/0005_activity_event.ts). */
  user_id: string | null;
  device_id: string | null;
  proposal_id: string | null;
  event: string;
  actor: string;
  tool: string | null;
  mode: string | null;
  input_digest: string | null;
  outcome: string;
  error_code: string | null;
  duration_ms: number | null;
  /** The credential that made the call, e.g. `token:<id>` or `oauth:<client id>` (MCP calls). */
  credential: ColumnType<string | null, string | null | undefined, string | null>;
  at: Generated<Date>;
  ip_address: ColumnType<string | null, string | null | undefined, string | null>;
  user_agent: ColumnType<string | null, string | null | undefined, string | null>;
  /** Non-secret facts about the event (sign-in method, token name, attempted address, …). */
  detail: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
}

/**
 * The audit columns a writer fills, with their PostgreSQL types, for the batch writer's one-array-per-
 * column INSERT (src/db/batch-writer.ts); `id` and `at` take their defaults. Kept beside the table's
 * type so that a column added to one is seen missing from the other by the type check below.
 */
export const ACTIVITY_EVENT_COLUMNS = {
  user_id: "text",
  device_id: "text",
  proposal_id: "text",
  event: "text",
  actor: "text",
  tool: "text",
  mode: "text",
  input_digest: "text",
  outcome: "text",
  error_code: "text",
  duration_ms: "int4",
  credential: "text",
  ip_address: "text",
  user_agent: "text",
  detail: "jsonb",
} as const satisfies Record<Exclude<keyof ActivityEventTable, "id" | "at">, string>;

/** better-auth's two-factor plugin (migrations/0060_accounts.ts); the secret is encrypted. */
export interface TwoFactorTable {
  id: string;
  secret: string;
  backupCodes: string;
  userId: string;
  verified: boolean | null;
  failedVerificationCount: number | null;
  lockedUntil: Timestamp | null;
  /** The time step of the last accepted TOTP code (migrations/0072); `pg` reads a bigint as a string. */
  lastAcceptedStep: ColumnType<number | string | null, number | null | undefined, number | null>;
}

/** @better-auth/passkey's credentials: public keys only. */
export interface PasskeyTable {
  id: string;
  name: string | null;
  publicKey: string;
  userId: string;
  credentialID: string;
  counter: number;
  deviceType: string;
  backedUp: boolean;
  transports: string | null;
  createdAt: Timestamp | null;
  aaguid: string | null;
}

export interface McpSettingTable {
  user_id: string;
  allow_actions: boolean;
  updated_at: Generated<Date>;
}

/** A credential limited to chosen devices (migrations/0150_credential_device_grants.ts). */
export interface HostDeviceGrantTable {
  user_id: string;
  /** `token:<api token id>` or `oauth:<client id>`. */
  credential: string;
  /** Written as a JSON string, read back as the list. */
  device_ids: ColumnType<string[], string, string>;
  created_at: Generated<Date>;
}

export type HostDeviceRow = Selectable<HostDeviceTable>;
export type HostProposalRow = Selectable<HostProposalTable>;
export type ActivityEventRow = Selectable<ActivityEventTable>;

/** A tool call that outlives its request (migrations/0170_mcp_task.ts, src/plugins/mcp/tasks.ts). */
export interface McpTaskTable {
  id: string;
  user_id: string;
  /** The credential key that started it (`token:<id>`, `oauth-token:<hash>`): only it may read it. */
  credential: string;
  tool: string;
  /** A mutate tool's proposal: the task's status is the proposal's. */
  proposal_id: string | null;
  /** working | completed | failed | cancelled (a proposal's task stores only `cancelled`). */
  status: string;
  result: ColumnType<unknown, string | null, string | null> | null;
  error: ColumnType<unknown, string | null, string | null> | null;
  poll_interval_ms: number;
  /** A read call still `working` past this died with the replica that ran it. */
  run_deadline: Timestamp | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  expires_at: Timestamp;
  /** A proposal's task that asks the client to show the approval URL (`input_required`, migrations/0180). */
  input_url: ColumnType<boolean, boolean | undefined, boolean>;
  /** When the client answered that input request: the task is `working` from then until the owner decides. */
  input_answered_at: Timestamp | null;
}

/** A 2025-11-25 call waiting for its retry after a URL elicitation (migrations/0190, src/plugins/mcp/legacy-elicitation.ts). */
export interface McpUrlElicitationTable {
  /** sha256 of the user, the credential, the tool and its arguments (canonical JSON). */
  retry_key: string;
  user_id: string;
  /** The credential key that made the call (`token:<id>`, `oauth-token:<hash>`): only its streams hear of the decision. */
  credential: string;
  proposal_id: string;
  created_at: Generated<Date>;
  expires_at: Timestamp;
}
