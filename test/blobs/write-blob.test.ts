/**
 * write_file with blob content, in process with the real device runtime: the caller uploads a blob first
 * (POST /api/host/blobs + PUT), then proposes write_file { path, blob }. A small text blob is proposed as a diff,
 * a binary one by size, type and sha256 before and after; approving makes the device download the blob through
 * a signed URL (fresh at apply), check its digest and write it atomically. Bytes that are not the blob's (the
 * store's file altered after the proposal) are refused with nothing written; another user's blob is not found.
 */
import { randomBytes } from "node:crypto";
import { readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import t, { type Test } from "tap";
import { readJson, type TestClient } from "../helpers/client.js";
import { signedIn, startHostServer } from "../host/helpers.js";
import { runtimeDevice, sha256, tempDir } from "./helpers.js";

async function withDevice(t: Test) {
  const blobDir = await tempDir(t, "tether-wblob-store-");
  const server = await startHostServer(t, { env: { BLOB_DIR: blobDir } });
  const owner = await signedIn(server.url);
  const { root, deviceId } = await runtimeDevice(t, server.url, owner);
  return { server, owner, root, blobDir, deviceId };
}

async function uploaded(owner: TestClient, bytes: Buffer, contentType: string): Promise<string> {
  const made = await readJson(await owner.post("/api/host/blobs", { size: bytes.length, digest: sha256(bytes), contentType }));
  const put = await fetch(made.upload.url, { method: "PUT", body: new Uint8Array(bytes), headers: { "content-type": contentType } });
  if (put.status !== 200) throw new Error(`upload: ${put.status} ${await put.text()}`);
  return made.blob.id as string;
}

t.test("write_file from a blob: text as a diff, binary by size and digest, applied byte for byte", async (t) => {
  const { owner, root, deviceId, server } = await withDevice(t);
  const propose = async (input: Record<string, unknown>) => owner.post("/api/host/calls", { deviceId, tool: "write_file", input });

  await writeFile(path.join(root, "notes.txt"), "hello\n");
  const textBlob = await uploaded(owner, Buffer.from("hello\nworld\n"), "text/plain");
  const textProposal = await readJson(await propose({ path: "notes.txt", blob: textBlob }));
  t.match(textProposal, { tool: "write_file", diff: /\+world/ }, "a small text blob is proposed as a diff");
  t.equal(await readFile(path.join(root, "notes.txt"), "utf8"), "hello\n", "nothing written before approval");
  t.equal((await owner.post("/api/host/approve", { proposalId: textProposal.proposalId })).status, 200);
  t.equal(await readFile(path.join(root, "notes.txt"), "utf8"), "hello\nworld\n", "applied");

  const before = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0]), randomBytes(1000)]);
  await writeFile(path.join(root, "image.png"), before);
  const after = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0]), randomBytes(3 * 1024 * 1024)]);
  const binaryBlob = await uploaded(owner, after, "image/png");
  const binaryProposal = await readJson(await propose({ path: "image.png", blob: binaryBlob }));
  t.match(binaryProposal.summary, `${before.length} bytes, sha256 ${sha256(before)}`, "the size and digest before");
  t.match(binaryProposal.summary, `${after.length} bytes of image/png, sha256 ${sha256(after)}`, "and after");
  t.match(binaryProposal.diff, /^Binary files /);
  const approved = await owner.post("/api/host/approve", { proposalId: binaryProposal.proposalId });
  t.equal(approved.status, 200, "applied");
  await approved.body?.cancel();
  t.ok((await readFile(path.join(root, "image.png"))).equals(after), "the file is the blob, byte for byte");

  const stored = await readJson(await owner.get(`/api/host/proposals/${binaryProposal.proposalId}`));
  t.same(stored.input, { path: "image.png", blob: binaryBlob }, "the proposal keeps the blob's id, never a URL");

  const stranger = await signedIn(server.url);
  const notTheirs = await stranger.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "x.bin", blob: binaryBlob } });
  t.equal(notTheirs.status, 404, "another user's device is not found either way");
  await notTheirs.body?.cancel();
  const unknown = await propose({ path: "x.bin", blob: "b_AAAAAAAAAAAAAAAAAAAAAA" });
  t.equal(unknown.status, 404);
  t.equal((await readJson(unknown)).code, "BLOB_NOT_FOUND", "a blob that is not the caller's is not found");
  const asUrl = await propose({ path: "x.bin", blob: "https://example.com/evil" });
  t.equal(asUrl.status, 422, "a URL is not a blob id: refused before any device fetches anything");
  await asUrl.body?.cancel();
});

t.test("bytes that are not the blob's at apply are refused: nothing written, no temp file left", async (t) => {
  const { owner, root, blobDir, deviceId } = await withDevice(t);
  const before = Buffer.concat([Buffer.from([0, 1, 2, 0]), randomBytes(50_000)]);
  await writeFile(path.join(root, "data.bin"), before);
  // Over the text limit (10 MB), so the plan describes it without reading it and the streamed write is what checks.
  const after = Buffer.concat([Buffer.from([0, 1, 2, 0]), randomBytes(11 * 1024 * 1024)]);
  const id = await uploaded(owner, after, "application/octet-stream");
  const proposal = await readJson(await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "data.bin", blob: id } }));
  t.ok(proposal.proposalId, "proposed");
  // The store's bytes altered after the proposal (a corrupt disk, a tampered bucket): same size, other content.
  const altered = Buffer.from(after);
  altered[after.length - 1] = altered[after.length - 1]! ^ 0xff;
  await writeFile(path.join(blobDir, id), altered);
  const refused = await owner.post("/api/host/approve", { proposalId: proposal.proposalId });
  const body = await readJson(refused);
  t.equal(refused.status, 422, `refused (${JSON.stringify(body)})`);
  t.match(body, { code: "IO_ERROR", message: /sha256/ }, "the device refuses bytes that are not the blob's");
  t.ok((await readFile(path.join(root, "data.bin"))).equals(before), "the file is unchanged");
  t.same((await readdir(root)).sort(), ["data.bin"], "no temp file left beside it");
});
