/**
 * Blob handles on the real device executable (built from bin/host.ts), over loopback: a 200 MB text file and a
 * binary file read through handles and compared byte for byte with the files on disk; then the executable killed
 * mid-upload: the caller gets BLOB_INCOMPLETE and nothing partial is kept.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, open, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { builtExecutable, startHost } from "../../host/executable.js";
import { signedIn, startHostServer } from "../../host/helpers.js";
import { eventually } from "../../helpers/eventually.js";
import { readJson } from "../../helpers/client.js";

const executable = await builtExecutable(t);

/** Writes `megabytes` MB made of `block` repeated; returns its sha256. */
async function writeRepeated(file: string, block: Buffer, megabytes: number): Promise<string> {
  const hash = createHash("sha256");
  const handle = await open(file, "w");
  try {
    for (let written = 0; written < megabytes * 1024 * 1024; written += block.length) {
      await handle.write(block);
      hash.update(block);
    }
  } finally {
    await handle.close();
  }
  return hash.digest("hex");
}

/** Streams `url` and compares every byte with `file` at the same offset; the count of bytes compared. */
async function sameBytes(url: string, file: string): Promise<{ status: number; bytes: number; equal: boolean }> {
  const response = await fetch(url);
  if (response.status !== 200) return { status: response.status, bytes: 0, equal: false };
  const handle = await open(file, "r");
  let offset = 0;
  let equal = true;
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      const expected = Buffer.alloc(chunk.length);
      const { bytesRead } = await handle.read(expected, 0, chunk.length, offset);
      if (bytesRead !== chunk.length || !expected.equals(chunk)) equal = false;
      offset += chunk.length;
    }
    const size = (await handle.stat()).size;
    return { status: response.status, bytes: offset, equal: equal && offset === size };
  } finally {
    await handle.close();
  }
}

t.test("a 200 MB text file and a binary file through handles, byte for byte; a device killed mid-upload", async (t) => {
  const work = await mkdtemp(path.join(os.tmpdir(), "tether-e2e-blobs-"));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const root = path.join(work, "project");
  await mkdir(root, { recursive: true });
  const blobDir = path.join(work, "blobs");
  const line = Buffer.from("2026-11-27T01:02:03Z INFO a log line long enough to look like one, with some words\n");
  const textDigest = await writeRepeated(path.join(root, "big.log"), Buffer.concat(Array.from({ length: 1024 }, () => line)), 200);
  const binaryDigest = await writeRepeated(path.join(root, "data.bin"), Buffer.concat([Buffer.from([0, 1, 2, 3]), randomBytes(1024 * 1024 - 4)]), 8);

  const server = await startHostServer(t, { env: { BLOB_DIR: blobDir, REQUEST_TIMEOUT_MS: "600000" } });
  const owner = await signedIn(server.url);
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
  const host = startHost(
    executable,
    {
      TETHER_SERVER_URL: server.url,
      TETHER_PAIRING_CODE: code,
      TETHER_ROOTS: "project",
      TETHER_CONFIG_DIR: path.join(work, "config"),
      TETHER_DEVICE_NAME: "blob-box",
    },
    work,
  );
  t.teardown(() => {
    if (host.child.exitCode === null) host.child.kill("SIGKILL");
  });
  await host.waitFor(/connected to .* as "blob-box"/, 60_000);
  const deviceId = (await readJson(await owner.get("/api/host/devices"))).devices[0].id;
  const read = async (file: string) =>
    readJson(await owner.post("/api/host/calls", { deviceId, tool: "read_file", input: { path: file }, timeoutMs: 300_000 }));

  const text = await read("big.log");
  t.equal(text.result.truncated, true);
  t.match(text.result.blob, { digest: textDigest }, "the handle's digest is the file's sha256");
  const textFetch = await sameBytes(text.result.blob.url, path.join(root, "big.log"));
  t.same(textFetch, { status: 200, bytes: text.result.blob.size, equal: true }, "the 200 MB text file, byte for byte");

  const binary = await read("data.bin");
  t.match(binary.result, { binary: true, blob: { digest: binaryDigest } });
  t.same(
    await sameBytes(binary.result.blob.url, path.join(root, "data.bin")),
    { status: 200, bytes: 8 * 1024 * 1024, equal: true },
    "the binary file, byte for byte",
  );

  // A fresh handle for the large file, and the executable killed as soon as its upload has begun.
  await rm(path.join(blobDir, text.result.blob.id));
  const again = await read("big.log");
  const download = fetch(again.result.blob.url);
  await eventually(async () => (await readdir(path.join(blobDir, "tmp"))).length > 0, 60_000, "the upload to begin");
  host.child.kill("SIGKILL");
  const failed = await download;
  if (failed.status === 200) {
    // The download streams as the upload arrives (the last chunk waits for the digest): cut with it, never ended cleanly.
    await t.rejects(failed.arrayBuffer(), "the download that began with the upload is aborted: partial bytes never pass for the file");
  } else {
    // Killed before the first bytes reached the waiting download.
    t.equal(failed.status, 409);
    t.equal((await readJson(failed)).code, "BLOB_INCOMPLETE", "the caller hears the blob is incomplete");
  }
  await eventually(async () => (await readdir(path.join(blobDir, "tmp"))).length === 0, 10_000, "the partial upload to be removed");
  t.notOk((await readdir(blobDir)).includes(again.result.blob.id), "nothing partial kept");
});
