/**
 * Blob handles through the Redis dispatcher: two app instances on one database and one blob folder, with
 * REDIS_URL, the real device runtime connected to the first, the caller on the second. A read there gets a
 * handle whose bytes the device uploads when the second replica asks (the call routed through Redis), and a
 * write_file from a blob uploaded to the second is applied by the device on the first.
 */
import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { redisTest } from "../helpers/auth.js";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import { replicasSharingBlobs, runtimeDevice, sha256 } from "./helpers.js";

redisTest(t, "a blob handle works when the caller and the device are on different replicas", async (t) => {
  const { first, second } = await replicasSharingBlobs(t, "redis-blobs");
  const email = uniqueEmail("blob-replicas");
  const onFirst = new TestClient(first.url);
  await onFirst.signUp(email);
  const onSecond = new TestClient(second.url);
  t.equal((await onSecond.signIn(email)).status, 200, "signed in on the second replica too");
  const { root, deviceId } = await runtimeDevice(t, first.url, onFirst);

  const binary = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]), randomBytes(3 * 1024 * 1024)]);
  await writeFile(path.join(root, "image.png"), binary);
  const read = await readJson(await onSecond.post("/api/host/calls", { deviceId, tool: "read_file", input: { path: "image.png" } }));
  t.match(
    read.result?.blob,
    { size: binary.length, digest: sha256(binary), url: new RegExp(`^${second.url}/api/host/blobs/b_`) },
    "the second replica's handle",
  );
  const fetched = await fetch(read.result.blob.url);
  t.equal(fetched.status, 200);
  t.ok(Buffer.from(await fetched.arrayBuffer()).equals(binary), "the device on the first replica uploaded it, byte for byte");
  const range = await fetch(read.result.blob.url, { headers: { range: "bytes=100-199" } });
  t.ok(Buffer.from(await range.arrayBuffer()).equals(binary.subarray(100, 200)), "and a range is served from the store");

  const after = randomBytes(500_000);
  const made = await readJson(await onSecond.post("/api/host/blobs", { size: after.length, digest: sha256(after), contentType: "application/octet-stream" }));
  t.equal((await fetch(made.upload.url, { method: "PUT", body: new Uint8Array(after) })).status, 200, "uploaded to the second replica");
  const proposal = await readJson(await onSecond.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "data.bin", blob: made.blob.id } }));
  t.ok(proposal.proposalId, "proposed through the second replica");
  const approved = await onSecond.post("/api/host/approve", { proposalId: proposal.proposalId });
  t.equal(approved.status, 200, "applied");
  await approved.body?.cancel();
  t.ok((await readFile(path.join(root, "data.bin"))).equals(after), "the device on the first replica wrote the blob, byte for byte");
});
