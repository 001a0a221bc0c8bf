import path from "node:path";

/** Blobs' configuration (docs/blobs.md; the variables are in docs/operations.md's reference). */
export interface BlobConfig {
  /** `embedded` (files under `dir`) or `s3`. */
  store: "embedded" | "s3";
  dir: string;
  retentionMs: number;
  quotaBytes: number;
  urlTtlMs: number;
  s3: S3Config | undefined;
}

export interface S3Config {
  bucket: string;
  region: string;
  /** An S3-compatible server's address (MinIO, Ceph, …); AWS when unset. */
  endpoint: string | undefined;
  forcePathStyle: boolean;
  /** `S3_ACCESS_KEY_ID` + `S3_SECRET_ACCESS_KEY`; unset, the AWS SDK's own chain (AWS_* variables, a profile, a role). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

type Env = Record<string, string | undefined>;

const UNITS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

function durationMs(env: Env, name: string, fallbackMs: number, problems: string[]): number {
  const raw = env[name]?.trim();
  if (!raw) return fallbackMs;
  const parsed = /^(\d{1,6})(s|m|h|d)$/.exec(raw);
  if (parsed) return Number(parsed[1]) * UNITS[parsed[2] as keyof typeof UNITS];
  problems.push(`${name}=${raw} is not a duration (like 24h, 30m or 7d)`);
  return fallbackMs;
}

/** `BLOB_STORE`, `BLOB_DIR`, `BLOB_RETENTION`, `BLOB_QUOTA_MB`, `BLOB_URL_TTL`, and the `S3_*` settings of the S3 store. */
export function loadBlobConfig(env: Env, dataDir: string, problems: string[]): BlobConfig {
  const kind = env.BLOB_STORE?.trim() || "embedded";
  if (kind !== "embedded" && kind !== "s3") problems.push(`BLOB_STORE=${kind} is not "embedded" or "s3"`);
  const quotaRaw = env.BLOB_QUOTA_MB?.trim();
  let quotaBytes = 10 * 1024 ** 3;
  if (quotaRaw) {
    if (/^\d{1,9}$/.test(quotaRaw)) quotaBytes = Number(quotaRaw) * 1024 ** 2;
    else problems.push(`BLOB_QUOTA_MB=${quotaRaw} is not a whole number of megabytes`);
  }
  let s3: S3Config | undefined;
  if (kind === "s3") {
    const bucket = env.S3_BUCKET?.trim();
    if (!bucket) problems.push("S3_BUCKET is required when BLOB_STORE=s3");
    const endpoint = env.S3_ENDPOINT?.trim() || undefined;
    if (endpoint !== undefined && !/^https?:\/\//.test(endpoint)) problems.push(`S3_ENDPOINT=${endpoint} is not an http(s) URL`);
    const accessKeyId = env.S3_ACCESS_KEY_ID?.trim();
    const secretAccessKey = env.S3_SECRET_ACCESS_KEY?.trim();
    if (Boolean(accessKeyId) !== Boolean(secretAccessKey))
      problems.push("S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together (or leave both unset for the AWS SDK's own credentials)");
    s3 = {
      bucket: bucket ?? "",
      region: env.S3_REGION?.trim() || "us-east-1",
      endpoint,
      forcePathStyle: env.S3_FORCE_PATH_STYLE?.trim() === "true" || endpoint !== undefined,
      ...(accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey } } : {}),
    };
  }
  return {
    store: kind === "s3" ? "s3" : "embedded",
    dir: path.resolve(env.BLOB_DIR?.trim() || path.join(dataDir, "blobs")),
    retentionMs: durationMs(env, "BLOB_RETENTION", 24 * 3_600_000, problems),
    quotaBytes,
    urlTtlMs: durationMs(env, "BLOB_URL_TTL", 15 * 60_000, problems),
    s3,
  };
}
