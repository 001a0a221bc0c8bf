/**
 * Files of uploads that never finished (a process killed mid-upload leaves its half-written file in the embedded
 * store's `tmp` or the browser uploads' `staging`) are removed when a store starts, once they have gone an hour
 * unwritten; a live upload's file, written as its bytes arrive, is never touched, not even by another replica
 * starting on the same folder; files we did not name are left alone.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readdir, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";
import { startTestApp } from "../helpers/app.js";
import { sha256, tempDir } from "./helpers.js";

/** A file as a killed process leaves it: half written, last modified `ageMs` ago. */
async function leftBehind(file: string, ageMs: number): Promise<void> {
  await writeFile(file, randomBytes(1000));
  const then = new Date(Date.now() - ageMs);
  await utimes(file, then, then);
}

t.test("a store that starts removes stale unfinished uploads, never a live one", async (t) => {
  const blobDir = await tempDir(t, "tether-unfinished-");
  const tmp = path.join(blobDir, "tmp");
  const staging = path.join(blobDir, "staging");
  await mkdir(tmp, { recursive: true });
  await mkdir(staging, { recursive: true });
  const hour = 3_600_000;
  await leftBehind(path.join(tmp, `b_${"A".repeat(22)}.0123456789ab`), 2 * hour);
  await leftBehind(path.join(staging, `upload-${"0".repeat(24)}`), 2 * hour);
  await leftBehind(path.join(tmp, `b_${"B".repeat(22)}.ba9876543210`), 5 * 60_000);
  await leftBehind(path.join(tmp, "operator-notes.txt"), 2 * hour);

  const first = await startTestApp(t, { env: { BLOB_DIR: blobDir } });
  t.same(
    (await readdir(tmp)).sort(),
    [`b_${"B".repeat(22)}.ba9876543210`, "operator-notes.txt"],
    "the store's file unwritten for 2 h is gone at start; a recent one and a foreign one stay",
  );
  t.same(await readdir(staging), [], "so is the browser upload's");

  // A live upload through the first replica, held open half way.
  const owner = new TestClient(first.url);
  await owner.signUp(uniqueEmail("unfinished"));
  const bytes = randomBytes(2 * 1024 * 1024);
  const made = await readJson(await owner.post("/api/host/blobs", { size: bytes.length, digest: sha256(bytes) }));
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
  const put = fetch(made.upload.url, { method: "PUT", body, duplex: "half", headers: { "content-length": String(bytes.length) } } as RequestInit);
  controller.enqueue(new Uint8Array(bytes.subarray(0, 1024 * 1024)));
  const live = `${made.blob.id}.`;
  await eventually(async () => (await readdir(tmp)).some((name) => name.startsWith(live)), 10_000, "the live upload's file in tmp");

  // Another store starting on the same folder (a replica, or a restart beside a running one) sweeps at start.
  await startTestApp(t, { env: { BLOB_DIR: blobDir }, database: first.database });
  t.match(await first.app.tetherBlobs.sweep(), { unfinished: 0 }, "a sweep now removes nothing");
  t.ok(
    (await readdir(tmp)).some((name) => name.startsWith(live)),
    "the live upload's file is still there",
  );

  controller.enqueue(new Uint8Array(bytes.subarray(1024 * 1024)));
  controller.close();
  t.equal((await put).status, 200, "and the upload completes");
  const fetched = await fetch(made.blob.url);
  t.ok(Buffer.from(await fetched.arrayBuffer()).equals(bytes), "whole");
});
