/**
 * The S3 store against s3rver (an S3-compatible server from npm, in this process on a free port): a device's
 * file read through a handle reaches the caller byte for byte while its bytes go from the device straight to
 * the bucket (a presigned PUT) and from the bucket to the caller (a redirect to a presigned GET), never through
 * the replica; a caller's own upload lands in the bucket; the bucket unreachable is 503 BLOB_STORE_UNAVAILABLE
 * and the same server works again once it is back. s3rver checks no signatures (STACK-NOTES): altered and
 * expired URLs are proven on the embedded store (embedded-store.test.ts).
 */
import { randomBytes } from "node:crypto";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { IncomingMessage } from "node:http";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import S3rver from "s3rver";
import t, { type Test } from "tap";
import { readJson } from "../helpers/client.js";
import { signedIn, startHostServer } from "../host/helpers.js";
import { runtimeDevice, sha256, tempDir } from "./helpers.js";

const BUCKET = "tether-test";

/** s3rver on `port` (0: a free one); stopped in teardown, its open sockets cut so close never waits. */
async function startS3(t: Test, directory: string, port = 0) {
  const s3 = new S3rver({ port, address: "127.0.0.1", silent: true, directory, configureBuckets: [{ name: BUCKET }] });
  const address = await s3.run();
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    s3.httpServer.closeAllConnections();
    await s3.close();
  };
  t.teardown(stop);
  return { s3, port: address.port, stop };
}

/** Every HTTP request any server in this process receives: on which port, method, path and declared length. */
function recordRequests(t: Test) {
  const seen: { port: number; method: string; url: string; length: number }[] = [];
  const listener = (message: unknown) => {
    const { request } = message as { request: IncomingMessage };
    seen.push({
      port: request.socket.localPort ?? 0,
      method: request.method ?? "",
      url: request.url ?? "",
      length: Number(request.headers["content-length"] ?? 0),
    });
  };
  subscribe("http.server.request.start", listener);
  t.teardown(() => unsubscribe("http.server.request.start", listener));
  return seen;
}

async function setUp(t: Test) {
  const s3dir = await tempDir(t, "tether-s3rver-");
  const s3 = await startS3(t, s3dir);
  const env = { BLOB_STORE: "s3", S3_BUCKET: BUCKET, S3_ENDPOINT: `http://127.0.0.1:${s3.port}`, S3_ACCESS_KEY_ID: "S3RVER", S3_SECRET_ACCESS_KEY: "S3RVER" };
  const server = await startHostServer(t, { env });
  const owner = await signedIn(server.url);
  return { s3, s3dir, server, owner };
}

t.test("a device's file through a handle: device → bucket → caller, never through the replica", async (t) => {
  const requests = recordRequests(t);
  const { s3, s3dir, server, owner } = await setUp(t);
  const { root, deviceId } = await runtimeDevice(t, server.url, owner);
  const binary = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]), randomBytes(2 * 1024 * 1024)]);
  await writeFile(path.join(root, "image.png"), binary);

  const read = await readJson(await owner.post("/api/host/calls", { deviceId, tool: "read_file", input: { path: "image.png" } }));
  const blob = read.result.blob;
  t.match(blob, { size: binary.length, digest: sha256(binary), contentType: "image/png", url: /\/api\/host\/blobs\/b_/ });

  const first = await fetch(blob.url, { redirect: "manual" });
  t.equal(first.status, 307, "the replica answers with a redirect, not the bytes");
  const location = first.headers.get("location")!;
  t.ok(location.startsWith(`http://127.0.0.1:${s3.port}/${BUCKET}/`), "to the bucket, presigned");
  await first.body?.cancel();
  const fetched = await fetch(blob.url);
  t.equal(fetched.status, 200);
  t.equal(fetched.headers.get("content-type"), "image/png");
  t.ok(Buffer.from(await fetched.arrayBuffer()).equals(binary), "the file, byte for byte");
  const part = await fetch(blob.url, { headers: { range: "bytes=100-199" } });
  t.equal(part.status, 206, "ranges are the bucket's");
  t.ok(Buffer.from(await part.arrayBuffer()).equals(binary.subarray(100, 200)));

  // The bucket down when a handle is first fetched: 503, and the same handle works once the bucket is back.
  await writeFile(path.join(root, "later.bin"), binary.subarray(0, 300_000));
  const later = (await readJson(await owner.post("/api/host/calls", { deviceId, tool: "read_file", input: { path: "later.bin" } }))).result.blob;
  await s3.stop();
  const down = await fetch(later.url);
  t.equal(down.status, 503, "the bucket unreachable: 503");
  t.equal((await readJson(down)).code, "BLOB_STORE_UNAVAILABLE");
  await startS3(t, s3dir, s3.port);
  const back = await fetch(later.url);
  t.equal(back.status, 200, "the bucket back: the same handle works, nothing restarted");
  t.ok(Buffer.from(await back.arrayBuffer()).equals(binary.subarray(0, 300_000)));

  // write_file from a blob on this store: the device downloads it from the bucket (a presigned GET sent with the call).
  const content = Buffer.concat([Buffer.from([0, 1, 0]), randomBytes(400_000)]);
  const made = await readJson(await owner.post("/api/host/blobs", { size: content.length, digest: sha256(content), contentType: "application/octet-stream" }));
  const put = await fetch(made.upload.url, { method: "PUT", body: new Uint8Array(content), headers: { "content-type": "application/octet-stream" } });
  t.equal(put.status, 200);
  await put.body?.cancel();
  const proposal = await readJson(await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "written.bin", blob: made.blob.id } }));
  const applied = await owner.post("/api/host/approve", { proposalId: proposal.proposalId });
  t.equal(applied.status, 200, "write_file from a blob in the bucket applies");
  await applied.body?.cancel();
  t.ok((await readFile(path.join(root, "written.bin"))).equals(content), "the device wrote the blob, byte for byte");
  t.same(
    requests.filter((r) => r.port !== s3.port && r.url.includes(made.blob.id)).map((r) => r.method),
    ["PUT"],
    "the replica saw only the caller's upload",
  );
  t.ok(
    requests.some((r) => r.port === s3.port && r.method === "GET" && r.url.includes(made.blob.id)),
    "the device read it from the bucket",
  );

  const toBucket = requests.filter((r) => r.port === s3.port && r.method === "PUT" && r.url.includes(blob.id));
  t.equal(toBucket.length, 1, "the device put the bytes to the bucket once");
  t.equal(toBucket[0]?.length, binary.length, "all of them");
  const toReplica = requests.filter((r) => r.port !== s3.port && r.url.includes(blob.id));
  t.same(
    toReplica.map((r) => r.method),
    ["GET", "GET", "GET"],
    "the replica saw only the three downloads, no upload",
  );
  t.ok(
    toReplica.every((r) => r.length === 0),
    "and no body",
  );
});

t.test("a caller's upload lands in the bucket; the bucket down is 503 BLOB_STORE_UNAVAILABLE, and back it just works", async (t) => {
  const { s3, s3dir, server, owner } = await setUp(t);
  const bytes = randomBytes(200_000);
  const make = async () =>
    readJson(await owner.post("/api/host/blobs", { size: bytes.length, digest: sha256(bytes), contentType: "application/octet-stream" }));
  const put = (url: string, body: Buffer) => fetch(url, { method: "PUT", body: new Uint8Array(body), headers: { "content-type": "application/octet-stream" } });

  const made = await make();
  const wrong = Buffer.from(bytes);
  wrong[5] = wrong[5]! ^ 1;
  const refused = await put(made.upload.url, wrong);
  t.equal(refused.status, 422);
  t.equal((await readJson(refused)).code, "BLOB_DIGEST_MISMATCH", "other bytes of the same size are refused");
  const gone = await fetch(`http://127.0.0.1:${s3.port}/${BUCKET}/tether-blobs/${made.blob.id}`);
  t.equal(gone.status, 404, "and nothing of them is left in the bucket");
  await gone.body?.cancel();

  const ok = await make();
  t.equal((await put(ok.upload.url, bytes)).status, 200);
  const back = await fetch(ok.blob.url);
  t.ok(Buffer.from(await back.arrayBuffer()).equals(bytes), "the upload comes back from the bucket");

  await s3.stop();
  const down = await make();
  const unavailable = await put(down.upload.url, bytes);
  t.equal(unavailable.status, 503, "the bucket unreachable: 503");
  t.equal((await readJson(unavailable)).code, "BLOB_STORE_UNAVAILABLE");

  await startS3(t, s3dir, s3.port);
  const again = await make();
  const stored = await put(again.upload.url, bytes);
  t.equal(stored.status, 200, "the bucket back: the same server stores again, nothing restarted");
  await stored.body?.cancel();
  t.ok(Buffer.from(await (await fetch(again.blob.url)).arrayBuffer()).equals(bytes));

  // The sweep lists the bucket: an object whose row is gone is deleted, the live blob stays.
  const object = (id: string) => `http://127.0.0.1:${s3.port}/${BUCKET}/tether-blobs/${id}`;
  const orphan = "b_AAAAAAAAAAAAAAAAAAAAAA";
  const planted = await fetch(object(orphan), { method: "PUT", body: "left behind" });
  t.equal(planted.status, 200);
  await planted.body?.cancel();
  t.match(await server.app.tetherBlobs.sweep(), { orphans: 1 }, "one orphan found");
  const orphanNow = await fetch(object(orphan));
  t.equal(orphanNow.status, 404, "the orphan's object is gone");
  await orphanNow.body?.cancel();
  const liveNow = await fetch(object(again.blob.id));
  t.equal(liveNow.status, 200, "the live blob's object stays");
  await liveNow.body?.cancel();
});
