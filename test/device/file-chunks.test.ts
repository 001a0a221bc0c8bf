/**
 * A blob upload's body (`src/device/file-chunks.ts`): a file's bytes read into two reused buffers, sent through the
 * device's own request function (undici) to a real HTTP server, arrive whole and in order, for a size that is not a
 * multiple of the chunk; a file shorter than announced sends only what it has; the descriptor is closed after.
 */
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { Agent } from "undici";
import { fileChunks, UPLOAD_CHUNK_BYTES } from "../../src/device/file-chunks.js";
import { deviceRequest } from "../../src/device/http.js";

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

/** How many of this process's descriptors are open on `file` (a closed number may already be another socket's). */
function openOn(file: string): number {
  return fs.readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`) === file;
    } catch {
      return false;
    }
  }).length;
}

/** A server that reads each PUT slowly and answers with the sha256 and length of what it received. */
async function receiver(t: Test) {
  const server = http.createServer((request, response) => {
    const hash = createHash("sha256");
    let length = 0;
    request.on("data", (chunk: Buffer) => {
      hash.update(chunk);
      length += chunk.length;
      // A slow reader: the device's socket fills and its writes wait, the case the buffer reuse must survive.
      request.pause();
      setTimeout(() => request.resume(), 1);
    });
    request.on("end", () => response.end(JSON.stringify({ digest: hash.digest("hex"), length })));
    request.on("error", () => response.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
}

t.test("a file several chunks long, not a multiple of the chunk, arrives whole and in order", async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), "tether-chunks-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const bytes = randomBytes(5 * UPLOAD_CHUNK_BYTES + 12_345);
  const file = path.join(dir, "data.bin");
  await writeFile(file, bytes);
  const url = await receiver(t);
  const dispatcher = new Agent();
  t.teardown(() => dispatcher.close());
  const request = deviceRequest(dispatcher);

  const fd = fs.openSync(file, "r");
  t.equal(openOn(file), 1);
  const body = fileChunks(fd, bytes.length);
  const response = await request(url, { method: "PUT", headers: { "content-length": String(bytes.length) }, body: body.chunks });
  t.same(JSON.parse(await response.text()), { digest: sha256(bytes), length: bytes.length }, "the same bytes, in order");
  await body.close();
  t.equal(openOn(file), 0, "the descriptor is closed");
});

t.test("a file shorter than announced sends what it has, and the request fails", async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), "tether-chunks-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const bytes = randomBytes(UPLOAD_CHUNK_BYTES + 10);
  const file = path.join(dir, "short.bin");
  await writeFile(file, bytes);
  const url = await receiver(t);
  const dispatcher = new Agent();
  t.teardown(() => dispatcher.close());
  const fd = fs.openSync(file, "r");
  t.equal(openOn(file), 1);
  const body = fileChunks(fd, bytes.length + 1000);
  await t.rejects(
    deviceRequest(dispatcher)(url, { method: "PUT", headers: { "content-length": String(bytes.length + 1000) }, body: body.chunks }),
    "a body shorter than its Content-Length is an error, never a shorter upload taken as whole",
  );
  await body.close();
  t.equal(openOn(file), 0, "the descriptor is closed");
});
