/**
 * The first download of a device blob streams while the device is still uploading (a scripted device, so the
 * pace of the upload is the test's): the client has bytes before the upload ends, and the whole file, verified,
 * at its end. An upload whose bytes are not the announced ones aborts the download (never a clean end) and
 * keeps nothing; fetching again asks the device again. A range asked for meanwhile waits for the upload under way
 * (one upload) and is served from the store.
 */
import { randomBytes } from "node:crypto";
import { readdir } from "node:fs/promises";
import t, { type Test } from "tap";
import { BLOB_UPLOAD_CALL, type AnnouncedTool } from "../../src/protocol/index.js";
import { readJson } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";
import { pair, ScriptedDevice, signedIn, startHostServer } from "../host/helpers.js";
import { sha256, tempDir } from "./helpers.js";

const readTool: AnnouncedTool = {
  name: "read_file",
  description: "Read",
  inputSchema: { type: "object", properties: { path: { type: "string" } } },
  class: "read",
};

/** A device that describes `bytes` as /data/big.bin; the handle's URL, and the device to script the upload with. */
async function handleFor(t: Test, bytes: Buffer) {
  const blobDir = await tempDir(t, "tether-live-store-");
  const server = await startHostServer(t, { env: { BLOB_DIR: blobDir } });
  const owner = await signedIn(server.url);
  const { deviceId, token } = await pair(owner);
  const reading = new ScriptedDevice(server.url, deviceId, token);
  await reading.hello([readTool]);
  await reading.connect();
  const source = { path: "/data/big.bin", size: bytes.length, sha256: sha256(bytes), contentType: "application/octet-stream" };
  reading.serve(() => ({ path: source.path, binary: true, size: bytes.length, blobSource: source }));
  const read = await readJson(await owner.post("/api/host/calls", { deviceId, tool: "read_file", input: { path: "big.bin" } }));
  reading.disconnect();
  // The same device again, answering by hand: the upload is the test's to pace.
  const device = new ScriptedDevice(server.url, deviceId, token);
  await device.hello([readTool]);
  await device.connect();
  t.teardown(() => device.disconnect());
  return { blobDir, device, url: read.result.blob.url as string };
}

/** A PUT whose body the test feeds: `push` a chunk, `end` it. */
function pacedUpload(url: string) {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
  const response = fetch(url, { method: "PUT", body, duplex: "half", headers: { "content-type": "application/octet-stream" } } as RequestInit);
  return { response, push: (chunk: Buffer) => controller.enqueue(new Uint8Array(chunk)), end: () => controller.close() };
}

/** Reads a response's body, counting as it goes. */
function reader(response: Response) {
  const chunks: Buffer[] = [];
  let received = 0;
  const done = (async () => {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      chunks.push(Buffer.from(chunk));
      received += chunk.length;
    }
    return Buffer.concat(chunks);
  })();
  done.catch(() => {}); // handled where the test awaits it
  return { done, received: () => received };
}

t.test("the first download streams the bytes while the device uploads them", async (t) => {
  const bytes = randomBytes(4 * 1024 * 1024);
  const { device, url } = await handleFor(t, bytes);
  const download = fetch(url);
  const call = await device.nextCall();
  t.equal(call.tool, BLOB_UPLOAD_CALL);
  const upload = pacedUpload(call.input.url);
  const half = 2 * 1024 * 1024;
  for (let at = 0; at < half; at += 64 * 1024) upload.push(bytes.subarray(at, at + 64 * 1024));
  const response = await download;
  t.equal(response.status, 200, "the download answers as soon as the upload begins");
  t.equal(response.headers.get("content-length"), String(bytes.length));
  t.equal(response.headers.get("etag"), `"${sha256(bytes)}"`);
  const body = reader(response);
  await eventually(
    () => body.received() >= 1024 * 1024,
    10_000,
    () => `bytes before the upload's end (${body.received()})`,
  );
  t.ok(body.received() < bytes.length, "the client has part of the file while the upload is still open");
  for (let at = half; at < bytes.length; at += 64 * 1024) upload.push(bytes.subarray(at, at + 64 * 1024));
  upload.end();
  t.equal((await upload.response).status, 200, "the upload is accepted");
  await device.postResult({ id: call.id, ok: true, result: { uploaded: true, size: bytes.length, sha256: sha256(bytes) } });
  t.ok((await body.done).equals(bytes), "the whole file, byte for byte");
  const range = await fetch(url, { headers: { range: "bytes=10-19" } });
  t.equal(range.status, 206, "later fetches are served from the store");
  t.ok(Buffer.from(await range.arrayBuffer()).equals(bytes.subarray(10, 20)));
});

t.test("a range asked for while the upload streams waits for it, then is served from the store", async (t) => {
  const bytes = randomBytes(3 * 1024 * 1024);
  const { device, url } = await handleFor(t, bytes);
  const download = fetch(url);
  const call = await device.nextCall();
  const upload = pacedUpload(call.input.url);
  for (let at = 0; at < 1024 * 1024; at += 64 * 1024) upload.push(bytes.subarray(at, at + 64 * 1024));
  const body = reader(await download);
  await eventually(() => body.received() > 0, 10_000, "the first download under way");
  // Bytes already uploaded and bytes not yet: both wait for the whole, verified upload.
  let answered = false;
  const ranges = Promise.all([fetch(url, { headers: { range: "bytes=10-19" } }), fetch(url, { headers: { range: `bytes=${bytes.length - 100}-` } })]).finally(
    () => (answered = true),
  );
  for (let at = 1024 * 1024; at < bytes.length; at += 64 * 1024) upload.push(bytes.subarray(at, at + 64 * 1024));
  t.notOk(answered, "no range is answered before the upload has ended");
  upload.end();
  t.equal((await upload.response).status, 200);
  await device.postResult({ id: call.id, ok: true, result: { uploaded: true, size: bytes.length, sha256: sha256(bytes) } });
  const [head, tail] = await ranges;
  t.equal(head.status, 206);
  t.equal(head.headers.get("content-range"), `bytes 10-19/${bytes.length}`);
  t.ok(Buffer.from(await head.arrayBuffer()).equals(bytes.subarray(10, 20)), "a range of bytes that had arrived");
  t.equal(tail.status, 206);
  t.ok(Buffer.from(await tail.arrayBuffer()).equals(bytes.subarray(-100)), "a range of bytes that had not");
  t.ok((await body.done).equals(bytes), "the streamed download is whole");
  t.equal(device.events.filter((event) => event.event === "call").length, 0, "the ranges joined the upload under way: the device was asked once");
});

t.test("an upload whose bytes are not the announced ones aborts the download and keeps nothing", async (t) => {
  const bytes = randomBytes(2 * 1024 * 1024);
  const { blobDir, device, url } = await handleFor(t, bytes);
  const download = fetch(url);
  const call = await device.nextCall();
  const upload = pacedUpload(call.input.url);
  const wrong = Buffer.from(bytes);
  wrong[wrong.length - 1] = wrong[wrong.length - 1]! ^ 0xff;
  for (let at = 0; at < wrong.length; at += 64 * 1024) upload.push(wrong.subarray(at, at + 64 * 1024));
  const response = await download;
  t.equal(response.status, 200, "the download began with the upload");
  const body = reader(response);
  upload.end();
  const put = await upload.response;
  t.equal(put.status, 422);
  t.equal((await readJson(put)).code, "BLOB_DIGEST_MISMATCH", "the upload is refused");
  await device.postResult({ id: call.id, ok: false, error: { code: "IO_ERROR", message: "upload refused" } });
  await t.rejects(body.done, "the download is aborted, never ended cleanly");
  t.ok(body.received() < bytes.length, `the client never got the whole length (${body.received()} bytes)`);
  await eventually(
    async () => (await readdir(blobDir)).filter((name) => name !== "tmp").length === 0 && (await readdir(`${blobDir}/tmp`)).length === 0,
    5_000,
    "nothing kept",
  );

  // Fetching again asks the device again (the blob was never marked complete).
  const retry = fetch(url);
  const again = await device.nextCall();
  t.equal(again.tool, BLOB_UPLOAD_CALL, "a new upload is asked for");
  const done = await fetch(again.input.url, { method: "PUT", body: new Uint8Array(bytes) });
  t.equal(done.status, 200);
  await device.postResult({ id: again.id, ok: true, result: { uploaded: true, size: bytes.length, sha256: sha256(bytes) } });
  t.ok(Buffer.from(await (await retry).arrayBuffer()).equals(bytes), "and the retry gets the file");
});
