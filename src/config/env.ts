import { isIP } from "node:net";
import path from "node:path";
import { originOf } from "../http/origins.js";
import { loadBlobConfig, type BlobConfig } from "./blob-env.js";
import { DEFAULT_PENDING_LIMITS, DEFAULT_RETENTION_MS } from "../plugins/host/proposals.js";

/** Validated configuration of the example app, read from the environment once at start-up. */
export interface AppConfig {
  port: number;
  host: string;
  production: boolean;
  baseURL: string;
  /** Undefined on the embedded default: the secret is then generated once and kept in `dataDir`. */
  secret: string | undefined;
  trustedOrigins: string[];
  databaseURL: string | undefined;
  redisURL: string | undefined;
  dataDir: string;
  trustProxy: boolean | string | number;
  edgeSso: EdgeSsoConfig | undefined;
  limits: ServerLimits;
  /** The `/mcp` rate limit per credential; enforced in production only, as the auth API's limits are. */
  mcpRateLimit: McpRateLimit;
  /** Passkey registration and sign-in (`PASSKEYS_ENABLED`). */
  passkeysEnabled: boolean;
  /** Per-account guessing protection: `SIGN_IN_LOCKOUT_ATTEMPTS` failures within `SIGN_IN_LOCKOUT_SECONDS`. */
  signInLockout: { maxFailures: number; windowSeconds: number };
  /** Device authorization (RFC 8628): how long a code lives, and the polling interval devices are told. */
  deviceCodeExpiresIn: string;
  devicePollInterval: string;
  /** Where the device executables offered for download are (`npm run build:host` writes dist/downloads). */
  downloadsDir: string;
  /** Mutation proposals: how many may wait, and how long a decided one keeps its diff. */
  proposals: ProposalConfig;
  /** The oldest tether-host version supported (`MIN_HOST_VERSION`); undefined: any. */
  minHostVersion: string | undefined;
  /**
   * `npm start` builds tether-host for this machine in the background when `downloadsDir` has none
   * (`HOST_BUILD_ON_START`; default on in development, off when `NODE_ENV` is `production` or `test`).
   */
  hostBuildOnStart: boolean;
  /** Blobs (large and binary files): the store, retention, quota and URL lifetime (`BLOB_*`, `S3_*`; docs/blobs.md). */
  blobs: BlobConfig;
  /**
   * OAuth clients identified by Client ID Metadata Documents (`MCP_CLIENT_ID_METADATA_DOCUMENTS`, default on);
   * hosts whose documents may be on private or loopback addresses (`MCP_CIMD_ALLOW_HOSTS`, default none) and
   * a CA file trusted for them (`MCP_CIMD_CA_FILE`). docs/security.md says why both default closed.
   */
  cimd: { enabled: boolean; allowHosts: string[]; caFile: string | undefined };
}

/** See README, Configuration: `MAX_PENDING_PROPOSALS_PER_USER`, `…_PER_DEVICE`, `PROPOSAL_RETENTION`. */
export interface ProposalConfig {
  /** Proposals waiting for one user's decision at once; the next is refused (429 TOO_MANY_PENDING). */
  maxPendingPerUser: number;
  /** …and from one device. */
  maxPendingPerDevice: number;
  /** How long a decided or expired proposal keeps its diff, input and result (the row stays). */
  retentionMs: number;
}

export const DEFAULT_PROPOSAL_CONFIG: ProposalConfig = {
  maxPendingPerUser: DEFAULT_PENDING_LIMITS.perUser,
  maxPendingPerDevice: DEFAULT_PENDING_LIMITS.perDevice,
  retentionMs: DEFAULT_RETENTION_MS,
};

/** Bounds on what one client may hold of the server (see README, Production checklist). */
export interface ServerLimits {
  /** The whole request (headers and body) must arrive within this (0: no limit). `REQUEST_TIMEOUT_MS`. */
  requestTimeoutMs: number;
  /** The headers must arrive within this; at most `requestTimeoutMs`. `HEADERS_TIMEOUT_MS`. */
  headersTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. `KEEP_ALIVE_TIMEOUT_MS`. */
  keepAliveTimeoutMs: number;
  /** A socket with no traffic either way for this long is closed (event streams exempt). `CONNECTION_TIMEOUT_MS`. */
  connectionTimeoutMs: number;
  /** Requests served on one keep-alive connection before it is closed (0: no limit). `MAX_REQUESTS_PER_SOCKET`. */
  maxRequestsPerSocket: number;
  /** Open connections at once; further ones are refused (0: no limit). `MAX_CONNECTIONS`. */
  maxConnections: number;
  /**
   * Long-lived streams (device streams, `/devices` live views, MCP notification streams) one user may
   * hold at once, each kind counted apart, across replicas with Redis (0: no limit). `STREAMS_PER_USER`.
   */
  streamsPerUser: number;
  /** Long-lived streams opened with one credential (API token, OAuth access token, device token, browser session). `STREAMS_PER_CREDENTIAL`. */
  streamsPerCredential: number;
  /**
   * Connections long-lived streams of every kind together leave free for ordinary requests and health
   * checks: streams may hold at most `maxConnections - this` (ignored when `maxConnections` is 0).
   * `STREAM_RESERVED_CONNECTIONS`, default a tenth of `MAX_CONNECTIONS`.
   */
  streamReservedConnections: number;
  /** How long a replica's stream keeps counting in Redis after the replica stopped renewing it (crashed). `STREAM_LEASE_SECONDS`. */
  streamLeaseSeconds: number;
  /** Requests of one credential (or client address) worked on at once; the rest wait their turn (0: no limit). `CONCURRENT_REQUESTS_PER_CREDENTIAL`. */
  concurrentRequestsPerCredential: number;
}

/** Requests to `/mcp` per credential per window, in production (`MCP_RATE_LIMIT` per `MCP_RATE_LIMIT_WINDOW_SECONDS`; 0: no limit). */
export interface McpRateLimit {
  max: number;
  windowSeconds: number;
}

export const DEFAULT_MCP_RATE_LIMIT: McpRateLimit = { max: 300, windowSeconds: 60 };

export const DEFAULT_LIMITS: ServerLimits = {
  requestTimeoutMs: 30_000,
  headersTimeoutMs: 10_000,
  // Above the idle timeout of common load balancers (60 s), so they never reuse a connection we closed.
  keepAliveTimeoutMs: 72_000,
  // Above the longest a handler waits in silence (a device call's 30 s timeout).
  connectionTimeoutMs: 120_000,
  maxRequestsPerSocket: 1_000,
  maxConnections: 1_000,
  streamsPerUser: 64,
  streamsPerCredential: 16,
  streamReservedConnections: 100,
  streamLeaseSeconds: 30,
  concurrentRequestsPerCredential: 4,
};

export interface EdgeSsoConfig {
  trustedProxies: string[];
  secret: string | undefined;
  provision: boolean;
  userHeader: string;
  emailHeader: string;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

type Env = Record<string, string | undefined>;

const TRUE_WORDS = new Set(["1", "true", "yes", "on"]);
const FALSE_WORDS = new Set(["", "0", "false", "no", "off"]);

/** Reads and validates every setting, collecting one clear line per bad value. */
export function loadConfig(env: Env = process.env): AppConfig {
  const problems: string[] = [];
  const flag = (name: string): boolean => {
    const raw = (env[name] ?? "").trim().toLowerCase();
    if (TRUE_WORDS.has(raw)) return true;
    if (!FALSE_WORDS.has(raw)) problems.push(`${name}=${env[name]} is not a boolean (use true or false)`);
    return false;
  };

  const port = parsePort(env.PORT, problems);
  const host = env.HOST?.trim() || "127.0.0.1";
  const production = env.NODE_ENV === "production";

  const baseURL = env.BETTER_AUTH_URL?.trim() || `http://localhost:${port}`;
  if (originOf(baseURL) === undefined) {
    problems.push(`BETTER_AUTH_URL=${baseURL} is not an http(s) URL`);
  }

  const trustedOrigins = splitList(env.TRUSTED_ORIGINS);
  const normalizedOrigins: string[] = [];
  for (const entry of trustedOrigins) {
    const origin = bareOriginOf(entry);
    if (origin === undefined) {
      problems.push(`TRUSTED_ORIGINS entry "${entry}" is not an origin (http(s)://host[:port], no path)`);
    } else {
      normalizedOrigins.push(origin);
    }
  }

  const secret = env.BETTER_AUTH_SECRET?.trim() || undefined;
  if (secret !== undefined && secret.length < 32) {
    problems.push("BETTER_AUTH_SECRET must be at least 32 characters");
  }
  if (secret === undefined && production) {
    problems.push("BETTER_AUTH_SECRET is required when NODE_ENV=production");
  }

  const databaseURL = env.DATABASE_URL?.trim() || undefined;
  if (databaseURL !== undefined && !/^postgres(ql)?:\/\//.test(databaseURL)) {
    problems.push(`DATABASE_URL must be a postgres:// URL`);
  }
  const redisURL = env.REDIS_URL?.trim() || undefined;
  if (redisURL !== undefined && !/^rediss?:\/\//.test(redisURL)) {
    problems.push(`REDIS_URL must be a redis:// or rediss:// URL`);
  }

  const edgeSso = flag("SSO_ENABLED") ? loadEdgeSso(env, problems, flag) : undefined;
  const passkeysEnabled = flag("PASSKEYS_ENABLED");
  const signInLockout = {
    maxFailures: parseCount(env, "SIGN_IN_LOCKOUT_ATTEMPTS", 5, problems),
    windowSeconds: parseCount(env, "SIGN_IN_LOCKOUT_SECONDS", 900, problems),
  };
  const deviceCodeExpiresIn = duration(env, "DEVICE_CODE_EXPIRES_IN", "10m", problems);
  const devicePollInterval = duration(env, "DEVICE_POLL_INTERVAL", "5s", problems);

  const limits = loadLimits(env, problems);
  const proposals = loadProposalConfig(env, problems);
  const mcpRateLimit = {
    max: wholeNumber(env, "MCP_RATE_LIMIT", DEFAULT_MCP_RATE_LIMIT.max, problems),
    windowSeconds: parseCount(env, "MCP_RATE_LIMIT_WINDOW_SECONDS", DEFAULT_MCP_RATE_LIMIT.windowSeconds, problems),
  };
  const minHostVersion = env.MIN_HOST_VERSION?.trim() || undefined;
  if (minHostVersion !== undefined && !/^\d{1,6}\.\d{1,6}\.\d{1,6}$/.test(minHostVersion)) {
    problems.push(`MIN_HOST_VERSION=${minHostVersion} is not a version (like 1.2.0)`);
  }

  const buildSetting = env.HOST_BUILD_ON_START?.trim();
  const hostBuildOnStart = buildSetting ? flag("HOST_BUILD_ON_START") : !production && env.NODE_ENV !== "test";

  const dataDir = path.resolve(env.DATA_DIR?.trim() || "./data");
  const blobs = loadBlobConfig(env, dataDir, problems);

  const cimd = loadCimdConfig(env, flag);
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    port,
    host,
    production,
    baseURL: baseURL.replace(/\/$/, ""),
    secret,
    trustedOrigins: normalizedOrigins,
    databaseURL,
    redisURL,
    dataDir,
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    edgeSso,
    limits,
    mcpRateLimit,
    passkeysEnabled,
    signInLockout,
    deviceCodeExpiresIn,
    devicePollInterval,
    downloadsDir: path.resolve(env.DOWNLOADS_DIR?.trim() || "./dist/downloads"),
    proposals,
    minHostVersion,
    hostBuildOnStart,
    blobs,
    cimd,
  };
}

function loadCimdConfig(env: Env, flag: (name: string) => boolean): AppConfig["cimd"] {
  return {
    enabled: env.MCP_CLIENT_ID_METADATA_DOCUMENTS?.trim() ? flag("MCP_CLIENT_ID_METADATA_DOCUMENTS") : true,
    allowHosts: splitList(env.MCP_CIMD_ALLOW_HOSTS),
    caFile: env.MCP_CIMD_CA_FILE?.trim() || undefined,
  };
}

function loadProposalConfig(env: Env, problems: string[]): ProposalConfig {
  const maxPendingPerUser = parseCount(env, "MAX_PENDING_PROPOSALS_PER_USER", DEFAULT_PROPOSAL_CONFIG.maxPendingPerUser, problems);
  const maxPendingPerDevice = parseCount(env, "MAX_PENDING_PROPOSALS_PER_DEVICE", DEFAULT_PROPOSAL_CONFIG.maxPendingPerDevice, problems);
  const retention = env.PROPOSAL_RETENTION?.trim();
  let retentionMs = DEFAULT_PROPOSAL_CONFIG.retentionMs;
  if (retention) {
    const parsed = /^(\d{1,6})(s|m|h|d)$/.exec(retention);
    if (parsed) retentionMs = Number(parsed[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[parsed[2] as "s" | "m" | "h" | "d"];
    else problems.push(`PROPOSAL_RETENTION=${retention} is not a duration (like 7d, 12h or 30m)`);
  }
  return { maxPendingPerUser, maxPendingPerDevice, retentionMs };
}

function loadLimits(env: Env, problems: string[]): ServerLimits {
  const count = (name: string, fallback: number) => wholeNumber(env, name, fallback, problems);
  const limits: ServerLimits = {
    requestTimeoutMs: count("REQUEST_TIMEOUT_MS", DEFAULT_LIMITS.requestTimeoutMs),
    headersTimeoutMs: count("HEADERS_TIMEOUT_MS", DEFAULT_LIMITS.headersTimeoutMs),
    keepAliveTimeoutMs: count("KEEP_ALIVE_TIMEOUT_MS", DEFAULT_LIMITS.keepAliveTimeoutMs),
    connectionTimeoutMs: count("CONNECTION_TIMEOUT_MS", DEFAULT_LIMITS.connectionTimeoutMs),
    maxRequestsPerSocket: count("MAX_REQUESTS_PER_SOCKET", DEFAULT_LIMITS.maxRequestsPerSocket),
    maxConnections: count("MAX_CONNECTIONS", DEFAULT_LIMITS.maxConnections),
    streamsPerUser: count("STREAMS_PER_USER", DEFAULT_LIMITS.streamsPerUser),
    streamsPerCredential: count("STREAMS_PER_CREDENTIAL", DEFAULT_LIMITS.streamsPerCredential),
    streamReservedConnections: 0, // below: its default is a tenth of MAX_CONNECTIONS
    streamLeaseSeconds: parseCount(env, "STREAM_LEASE_SECONDS", DEFAULT_LIMITS.streamLeaseSeconds, problems),
    concurrentRequestsPerCredential: count("CONCURRENT_REQUESTS_PER_CREDENTIAL", DEFAULT_LIMITS.concurrentRequestsPerCredential),
  };
  const { maxConnections } = limits;
  limits.streamReservedConnections = count("STREAM_RESERVED_CONNECTIONS", Math.ceil(maxConnections / 10));
  // Streams must leave ordinary requests at least one connection, or /healthz and sign-in starve.
  if (maxConnections > 0 && limits.streamReservedConnections >= maxConnections) {
    problems.push(`STREAM_RESERVED_CONNECTIONS=${limits.streamReservedConnections} must be below MAX_CONNECTIONS=${maxConnections}`);
  }
  if (maxConnections > 0 && limits.streamReservedConnections === 0) {
    problems.push("STREAM_RESERVED_CONNECTIONS must be above 0 while MAX_CONNECTIONS caps connections");
  }
  if (limits.streamLeaseSeconds < 3)
    problems.push(`STREAM_LEASE_SECONDS=${limits.streamLeaseSeconds} must be at least 3 (leases are renewed every third of it)`);
  if (limits.headersTimeoutMs === 0) problems.push("HEADERS_TIMEOUT_MS must be above 0");
  // Node refuses a headers timeout longer than the request timeout.
  if (limits.requestTimeoutMs > 0 && limits.headersTimeoutMs > limits.requestTimeoutMs) {
    limits.headersTimeoutMs = limits.requestTimeoutMs;
  }
  return limits;
}

/** A whole number setting (0 allowed), or `fallback` when unset. */
function wholeNumber(env: Env, name: string, fallback: number, problems: string[]): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d{1,9}$/.test(raw)) {
    problems.push(`${name}=${env[name]} is not a whole number`);
    return fallback;
  }
  return Number(raw);
}

/** A positive whole number setting, or `fallback` when unset. */
function parseCount(env: Env, name: string, fallback: number, problems: string[]): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d{1,9}$/.test(raw) || Number(raw) < 1) {
    problems.push(`${name}=${env[name]} is not a positive whole number`);
    return fallback;
  }
  return Number(raw);
}

/** A better-auth time string such as `10m`, `5s` or `1.5s`. */
function duration(env: Env, name: string, fallback: string, problems: string[]): string {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+(\.\d+)?(s|m|h)$/.test(raw)) problems.push(`${name}=${raw} is not a duration (like 10m, 5s or 1.5s)`);
  return raw;
}

function loadEdgeSso(env: Env, problems: string[], flag: (name: string) => boolean): EdgeSsoConfig {
  const trustedProxies = splitList(env.EDGE_SSO_TRUSTED_PROXIES);
  for (const entry of trustedProxies) {
    const [address, bits, ...rest] = entry.split("/");
    const family = isIP(address ?? "");
    const maxBits = family === 6 ? 128 : 32;
    const validBits = bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= maxBits);
    if (family === 0 || !validBits || rest.length > 0) {
      problems.push(`EDGE_SSO_TRUSTED_PROXIES entry "${entry}" is not an IP address or CIDR`);
    }
  }
  const secret = env.EDGE_SSO_SECRET?.trim() || undefined;
  if (secret !== undefined && secret.length < 16) {
    problems.push("EDGE_SSO_SECRET must be at least 16 characters");
  }
  return {
    trustedProxies,
    secret,
    provision: flag("EDGE_SSO_PROVISION"),
    userHeader: env.EDGE_SSO_USER_HEADER?.trim() || "x-remote-user",
    emailHeader: env.EDGE_SSO_EMAIL_HEADER?.trim() || "x-remote-email",
  };
}

function parsePort(raw: string | undefined, problems: string[]): number {
  if (raw === undefined || raw.trim() === "") return 3000;
  // Decimal digits only: Number() would also read "0x50", "1e3" or "0b1" as ports.
  const port = /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    problems.push(`PORT=${raw} is not a port number (0-65535)`);
    return 3000;
  }
  return port;
}

/** Fastify's `trustProxy`: unset trusts no proxy; true/false, a hop count, or a list of addresses. */
function parseTrustProxy(raw: string | undefined): boolean | string | number {
  const value = raw?.trim() ?? "";
  if (FALSE_WORDS.has(value.toLowerCase())) return false;
  if (TRUE_WORDS.has(value.toLowerCase())) return true;
  if (/^\d+$/.test(value)) return Number(value);
  return value;
}

/** Comma-separated list: entries trimmed, empty ones dropped. */
export function splitList(raw: string | undefined): string[] {
  return (raw ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** The origin of a value that is nothing but an origin (no path, query, fragment or credentials). */
function bareOriginOf(value: string): string | undefined {
  try {
    const url = new URL(value);
    const bare = url.pathname === "/" && url.search === "" && url.hash === "" && url.username === "";
    return bare ? originOf(value) : undefined;
  } catch {
    return undefined;
  }
}

export { originOf };
