import path from "node:path";
import fp from "fastify-plugin";
import { blobUrlKey } from "./signed-url.js";
import { createEmbeddedBlobStore } from "./embedded-store.js";
import { blobRoutes } from "./routes.js";
import { createBlobService, type BlobService } from "./service.js";
import type { BlobStore } from "./store.js";

declare module "fastify" {
  interface FastifyInstance {
    /** Blobs: large and binary files moved outside calls, through signed URLs (docs/blobs.md). */
    tetherBlobs: BlobService;
  }
}

export interface BlobPluginOptions {
  /** The store; default the embedded one under `dir`. */
  store?: BlobStore;
  /** The embedded store's folder (default `./data/blobs`). */
  dir?: string;
  /** The key the URLs are signed with is derived from this (default: better-auth's secret). */
  secret?: string;
  /** How long a blob lives (default 24 h). */
  retentionMs?: number;
  /** Bytes one user's blobs may take at once (default 10 GiB): 429 `BLOB_QUOTA_EXCEEDED` beyond. */
  quotaBytes?: number;
  /** How long a signed URL works (default 15 min, never past the blob's expiry). */
  urlTtlMs?: number;
  /** How often expired blobs are swept (default 5 minutes, and once at start). */
  sweepIntervalMs?: number;
}

/**
 * Blobs on Fastify: decorates `fastify.tetherBlobs` and serves `/api/host/blobs`. Registered before the
 * host plugin, which then gives large and binary reads a handle and fetches their bytes from the device
 * when the handle is first used. The sweep runs on every replica (it is idempotent).
 */
export const blobPlugin = fp<BlobPluginOptions>(
  async (fastify, options) => {
    const secret = options.secret ?? fastify.tetherAuth.options.secret;
    if (!secret) throw new Error("blobPlugin: no secret to sign blob URLs with");
    const dir = path.resolve(options.dir ?? "data/blobs");
    const store = options.store ?? createEmbeddedBlobStore(dir);
    const service = createBlobService({
      db: fastify.tetherDb,
      store,
      key: blobUrlKey(secret),
      baseURL: String(fastify.tetherAuth.options.baseURL),
      // Browser uploads wait here while counted and hashed (beside the embedded store's files: same disk, no tmpfs).
      stagingDir: path.join(dir, "staging"),
      ...(options.retentionMs !== undefined ? { retentionMs: options.retentionMs } : {}),
      ...(options.quotaBytes !== undefined ? { quotaBytes: options.quotaBytes } : {}),
      ...(options.urlTtlMs !== undefined ? { urlTtlMs: options.urlTtlMs } : {}),
    });
    fastify.decorate("tetherBlobs", service);

    let sweeping: Promise<unknown> = Promise.resolve();
    const sweep = () => {
      sweeping = service.sweep().catch((error: unknown) => fastify.log.warn({ err: error }, "blobs: sweep failed"));
    };
    let timer: NodeJS.Timeout | undefined;
    fastify.addHook("onReady", async () => {
      sweep();
      await sweeping;
      timer = setInterval(sweep, options.sweepIntervalMs ?? 5 * 60_000);
      timer.unref();
    });
    fastify.addHook("preClose", async () => {
      clearInterval(timer);
      await sweeping;
    });
    fastify.addHook("onClose", async () => {
      await store.close?.();
    });
    await fastify.register(blobRoutes(service));
  },
  { name: "tether-blobs", fastify: "5.x", dependencies: ["tether-db", "tether-auth", "tether-session", "tether-errors"] },
);
