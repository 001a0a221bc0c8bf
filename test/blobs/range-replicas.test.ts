/**
 * A range asked of a replica other than the one receiving a device blob's first upload, once that upload is under
 * way (two replicas, one database, one blob folder, Redis): that replica asks the device for an upload of its own;
 * when the first upload completes the blob and the second then fails (its URL finds the blob complete), the range
 * is still served from the store, not answered with the second attempt's failure.
 */
import { randomBytes } from "node:crypto";
import t from "tap";
import { BLOB_UPLOAD_CALL, type AnnouncedTool } from "../../src/protocol/index.js";
import { redisTest } from "../helpers/auth.js";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import { pair, ScriptedDevice } from "../host/helpers.js";
import { replicasSharingBlobs, sha256 } from "./helpers.js";

const readTool: AnnouncedTool = {
  name: "read_file",
  description: "Read",
  inputSchema: { type: "object", properties: { path: { type: "string" } } },
  class: "read",
};

redisTest(t, "a range on another replica is served once the first upload completes, whatever became of its own", async (t) => {
  const { first, second } = await replicasSharingBlobs(t, "range-replicas");
  const email = uniqueEmail("range-replicas");
  const owner = new TestClient(first.url);
  await owner.signUp(email);
  const { deviceId, token } = await pair(owner);
  const device = new ScriptedDevice(first.url, deviceId, token);
  await device.hello([readTool]);
  await device.connect();
  t.teardown(() => device.disconnect());

  const bytes = randomBytes(1024 * 1024 + 7);
  const source = { path: "/data/big.bin", size: bytes.length, sha256: sha256(bytes), contentType: "application/octet-stream" };
  const reading = owner.post("/api/host/calls", { deviceId, tool: "read_file", input: { path: "big.bin" } });
  const readCall = await device.nextCall();
  await device.postResult({ id: readCall.id, ok: true, result: { path: source.path, binary: true, size: bytes.length, blobSource: source } });
  const url = (await readJson(await reading)).result.blob.url as string;

  const whole = fetch(url);
  const upload = await device.nextCall();
  t.equal(upload.tool, BLOB_UPLOAD_CALL, "the first replica asks for the upload");
  // The first upload under way: its body half sent, the first download already receiving it.
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
  const put = fetch(upload.input.url, { method: "PUT", body, duplex: "half", headers: { "content-length": String(bytes.length) } } as RequestInit);
  controller.enqueue(new Uint8Array(bytes.subarray(0, 512 * 1024)));
  const download = await whole;
  const reader = download.body!.getReader();
  t.ok(((await reader.read()).value?.length ?? 0) > 0, "the first download is receiving the upload");

  const range = fetch(url.replace(first.url, second.url), { headers: { range: "bytes=5-14" } });
  const again = await device.nextCall();
  t.equal(again.tool, BLOB_UPLOAD_CALL, "the second replica asks for one of its own");

  controller.enqueue(new Uint8Array(bytes.subarray(512 * 1024)));
  controller.close();
  t.equal((await put).status, 200, "the first upload completes the blob");
  await device.postResult({ id: upload.id, ok: true, result: { uploaded: true, size: bytes.length, sha256: sha256(bytes) } });
  const late = await fetch(again.input.url, { method: "PUT", body: new Uint8Array(bytes) });
  t.equal((await readJson(late)).code, "BLOB_URL_USED", "the second upload finds the blob complete");
  await device.postResult({ id: again.id, ok: false, error: { code: "IO_ERROR", message: "The upload was refused (409 BLOB_URL_USED)" } });
  while (!(await reader.read()).done);

  const part = await range;
  t.equal(part.status, 206, "the range is served");
  t.ok(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(5, 15)), "with the right bytes");
});
