/**
 * What the blob tests share: a temporary folder removed at the end, sha256 in hex, and the real device runtime
 * (`runHost`, in process) paired with a server and connected, serving one root.
 */
import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Test } from "tap";
import { loadCredential } from "../../src/device/credentials.js";
import { runHost } from "../../src/device/host.js";
import { builtinTools } from "../../src/tools/index.js";
import { readJson, type TestClient } from "../helpers/client.js";
import { TEST_REDIS_URL } from "../helpers/database.js";
import { startHostServer } from "../host/helpers.js";
import { eventually } from "../helpers/eventually.js";

export const sha256 = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");

export async function tempDir(t: Test, prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Pairs the real device runtime with `url` as `owner`, serving a fresh root; stopped at the end of `t`. */
export async function runtimeDevice(t: Test, url: string, owner: TestClient): Promise<{ root: string; deviceId: string }> {
  const root = await tempDir(t, "tether-blob-root-");
  const configDir = await tempDir(t, "tether-blob-cfg-");
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
  const stop = new AbortController();
  const lines: string[] = [];
  const host = runHost({
    server: url,
    tools: builtinTools,
    roots: [root],
    configDir,
    pairingCode: code,
    handleSignals: false,
    signal: stop.signal,
    log: (line) => lines.push(line),
  });
  t.teardown(async () => {
    stop.abort();
    await host;
  });
  await eventually(
    () => lines.some((line) => /connected to/.test(line)),
    15_000,
    () => `connected (${lines.join(" | ")})`,
  );
  return { root, deviceId: (await loadCredential(configDir, url))!.deviceId };
}

/** Two replicas on one database and one Redis, sharing one blob folder, as several replicas run with the embedded store. */
export async function replicasSharingBlobs(t: Test, name: string) {
  const env = { BLOB_DIR: await tempDir(t, `tether-${name}-`), REDIS_URL: TEST_REDIS_URL! };
  const first = await startHostServer(t, { env });
  const second = await startHostServer(t, { env, database: first.database });
  return { first, second };
}
