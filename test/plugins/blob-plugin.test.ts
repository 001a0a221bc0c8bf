import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { blobPlugin } from "../../src/plugins/host/blobs/blob-plugin.js";
import { testFetch } from "../helpers/inject.js";
import { alone, refusesWithout, signedUp } from "./bare.js";

t.test("it declares the session it finds the caller with", (t) => refusesWithout(t, blobPlugin, "tether-session"));

t.test("blobPlugin alone: make a blob, upload it once through its URL, download it", async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), "tether-blob-plugin-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const { url } = await alone(t, blobPlugin, { dir });
  const owner = await signedUp(url, "blobs");
  const bytes = randomBytes(4096);
  const made = await owner.post("/api/host/blobs", { size: bytes.length, digest: createHash("sha256").update(bytes).digest("hex") });
  t.equal(made.status, 201);
  const { blob, upload } = (await made.json()) as { blob: { url: string }; upload: { url: string } };
  const put = await testFetch(upload.url, { method: "PUT", body: new Uint8Array(bytes) });
  t.equal(put.status, 200);
  await put.body?.cancel();
  const downloaded = await testFetch(blob.url);
  t.equal(downloaded.status, 200);
  t.ok(Buffer.from(await downloaded.arrayBuffer()).equals(bytes), "the same bytes");
});
