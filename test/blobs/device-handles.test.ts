/**
 * Blob handles from a device, in process: the real device runtime (`runHost`) reads a large text file and a
 * binary one; the results carry a handle, and the bytes move only when its URL is fetched (the server asks
 * the device to upload, the download waits and streams). The path is re-resolved when the bytes are read; a
 * device gone mid-upload leaves the blob incomplete and a retry starts over (a scripted device, so the cut is
 * exact) and a download that began with the upload is aborted; revoking the device deletes its blobs; the audit log names each blob made and fetched.
 */
import { randomBytes } from "node:crypto";
import { readdir, symlink, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import t, { type Test } from "tap";
import { BLOB_UPLOAD_CALL, type AnnouncedTool } from "../../src/protocol/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { connectClient } from "../mcp/helpers.js";
import { eventually } from "../helpers/eventually.js";
import { pair, ScriptedDevice, signedIn, startHostServer } from "../host/helpers.js";
import { runtimeDevice, sha256, tempDir } from "./helpers.js";

async function withDevice(t: Test) {
  const blobDir = await tempDir(t, "tether-blob-store-");
  const server = await startHostServer(t, { env: { BLOB_DIR: blobDir } });
  const owner = await signedIn(server.url);
  const { root, deviceId } = await runtimeDevice(t, server.url, owner);
  const call = async (tool: string, input: Record<string, unknown>) => readJson(await owner.post("/api/host/calls", { deviceId, tool, input }));
  return { server, owner, root, blobDir, deviceId, call };
}

t.test("a large text file and a binary file: handles whose bytes come from the device when fetched", async (t) => {
  const { server, owner, root, blobDir, deviceId, call } = await withDevice(t);
  const line = "0123456789 the quick brown fox jumps over the lazy dog\n";
  const text = line.repeat(Math.ceil((3 * 1024 * 1024) / line.length));
  await writeFile(path.join(root, "big.log"), text);
  const binary = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]), randomBytes(700_000)]);
  await writeFile(path.join(root, "image.png"), binary);

  const read = await call("read_file", { path: "big.log" });
  t.equal(read.result.truncated, true, "still truncated");
  t.ok(Buffer.byteLength(read.result.content) <= 1024 * 1024, "still the first 1 MB at most");
  t.notOk("blobSource" in read.result, "the device's description is replaced by the handle");
  t.match(read.result.blob, { size: Buffer.byteLength(text), digest: sha256(text), contentType: "text/plain; charset=utf-8", url: /\/api\/host\/blobs\/b_/ });
  t.same(await readdir(blobDir).catch(() => []), [], "nothing uploaded yet: the handle alone moves no bytes");
  const hashed = await call("hash_file", { path: "big.log" });
  t.equal(hashed.result.hash, read.result.blob.digest, "hash_file's digest is the blob's");

  const fetched = await fetch(read.result.blob.url);
  t.equal(fetched.status, 200);
  t.equal(fetched.headers.get("etag"), `"${sha256(text)}"`);
  t.ok(Buffer.from(await fetched.arrayBuffer()).equals(Buffer.from(text)), "the whole file, byte for byte");
  const again = await fetch(read.result.blob.url, { headers: { range: "bytes=0-9" } });
  t.equal(await again.text(), text.slice(0, 10), "a second fetch (a range) is served from the store");

  const image = await call("read_file", { path: "image.png" });
  t.match(image.result, { binary: true, type: "png", sha256: sha256(binary), blob: { size: binary.length, digest: sha256(binary), contentType: "image/png" } });
  const bytes = Buffer.from(await (await fetch(image.result.blob.url)).arrayBuffer());
  t.ok(bytes.equals(binary), "the binary file, byte for byte");

  // The /devices page: a download link for the binary file and for the file too large to show.
  for (const file of ["image.png", "big.log"]) {
    const page = await owner.get(`/devices/${deviceId}/tools/read_file?arg.path=${file}`);
    const html = await page.text();
    const href = /<a href="([^"]+)" download>Download the whole file<\/a>/.exec(html)?.[1];
    t.match(href, /\/api\/host\/blobs\/b_/, `/devices offers ${file} for download`);
    const downloaded = await fetch(href!.replace(/&amp;/g, "&"), { headers: { cookie: owner.cookieHeader } });
    t.equal(downloaded.status, 200, `the page's link downloads ${file}`);
    await downloaded.body?.cancel();
  }

  // MCP: a resource_link to the blob, never its bytes in base64.
  const client = await connectClient(t, server.url, await mintToken(owner, { scopes: ["host:call"] }));
  const viaMcp = (await client.callTool({ name: "read_file", arguments: { device: deviceId, path: "image.png" } })) as CallToolResult;
  const link = viaMcp.content.find((part) => part.type === "resource_link");
  t.match(
    link,
    { type: "resource_link", name: "image.png", mimeType: "image/png", size: binary.length, uri: /\/api\/host\/blobs\/b_/ },
    "MCP results carry a resource_link",
  );
  t.notOk(
    viaMcp.content.some((part) => part.type === "image" || part.type === "resource"),
    "no embedded bytes",
  );
  t.notOk(JSON.stringify(viaMcp).includes(binary.subarray(9, 60).toString("base64")), "no base64 of the file anywhere");
  const linked = await fetch((link as { uri: string }).uri);
  t.ok(Buffer.from(await linked.arrayBuffer()).equals(binary), "the link downloads the file");

  await server.app.tetherAudit.flush();
  const rows = await server.database.db
    .selectFrom("activity_event")
    .select(["event", "actor", "detail"])
    .where("event", "in", ["blob_make", "blob_fetch"])
    .orderBy("id")
    .execute();
  t.same(
    rows.map((row) => row.event),
    ["blob_make", "blob_fetch", "blob_fetch", "blob_make", "blob_fetch", "blob_make", "blob_fetch", "blob_make", "blob_fetch", "blob_make", "blob_fetch"],
    "each blob made and each fetch is in the audit log",
  );
  t.match(rows[0]!.detail, { path: path.join(root, "big.log"), size: Buffer.byteLength(text), digest: sha256(text) });
  t.equal(rows[1]!.actor, "url", "fetched by whoever held the URL");
});

t.test("the path is resolved inside the roots again when the bytes are read: a symlink swapped in is refused", async (t) => {
  const { root, blobDir, call } = await withDevice(t);
  const outside = await tempDir(t, "tether-blob-outside-");
  const bytes = Buffer.concat([Buffer.from([0]), randomBytes(10_000)]);
  await writeFile(path.join(root, "swap.bin"), bytes);
  const read = await call("read_file", { path: "swap.bin" });
  t.ok(read.result.blob, "a handle for the file inside the roots");
  // The same bytes outside the roots, and the name inside now a link to them.
  await writeFile(path.join(outside, "secret.bin"), bytes);
  await unlink(path.join(root, "swap.bin"));
  await symlink(path.join(outside, "secret.bin"), path.join(root, "swap.bin"));
  const response = await fetch(read.result.blob.url);
  t.equal(response.status, 422);
  t.equal((await readJson(response)).code, "OUTSIDE_ROOTS", "the device refuses: the path now leads outside its roots");
  t.same(
    (await readdir(blobDir)).filter((name) => name !== "tmp"),
    [],
    "nothing stored",
  );
});

t.test("a device gone mid-upload: the download is aborted, nothing kept, and fetching again starts over", async (t) => {
  const blobDir = await tempDir(t, "tether-blob-store-");
  const server = await startHostServer(t, { env: { BLOB_DIR: blobDir } });
  const owner = await signedIn(server.url);
  const { deviceId, token } = await pair(owner);
  const readTool: AnnouncedTool = {
    name: "read_file",
    description: "Read",
    inputSchema: { type: "object", properties: { path: { type: "string" } } },
    class: "read",
  };
  const bytes = randomBytes(2 * 1024 * 1024);
  const source = { path: "/data/big.bin", size: bytes.length, sha256: sha256(bytes), contentType: "application/octet-stream" };

  const first = new ScriptedDevice(server.url, deviceId, token);
  await first.hello([readTool]);
  await first.connect();
  first.serve(() => ({ path: source.path, binary: true, size: bytes.length, blobSource: source }));
  const read = await readJson(await owner.post("/api/host/calls", { deviceId, tool: "read_file", input: { path: "big.bin" } }));
  const { url } = read.result.blob;
  first.disconnect();

  // A device's own `blob` (a link to anywhere) never reaches the caller: only the server writes it.
  const forger = new ScriptedDevice(server.url, deviceId, token);
  await forger.hello([readTool]);
  await forger.connect();
  forger.serve(() => ({ path: source.path, binary: true, blob: { url: "https://evil.example/x", size: 1 } }));
  const forged = await readJson(await owner.post("/api/host/calls", { deviceId, tool: "read_file", input: { path: "big.bin" } }));
  t.notOk("blob" in forged.result, "a device-made blob field is dropped");
  forger.disconnect();

  // A device that sends half the bytes, then is gone (its stream and its upload cut at once).
  const cut = new ScriptedDevice(server.url, deviceId, token);
  await cut.hello([readTool]);
  await cut.connect();
  const download = fetch(url);
  const upload = await cut.nextCall();
  t.equal(upload.tool, BLOB_UPLOAD_CALL, "fetching the handle asks the device to upload");
  t.match(upload.input, { path: source.path, size: bytes.length, sha256: source.sha256 });
  const abort = new AbortController();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes.subarray(0, 1024 * 1024));
    },
  });
  const put = fetch(upload.input.url, {
    method: "PUT",
    body,
    duplex: "half",
    signal: abort.signal,
    headers: { "content-type": "application/octet-stream" },
  } as RequestInit).catch(() => undefined);
  await eventually(async () => (await readdir(path.join(blobDir, "tmp")).catch(() => [])).length > 0, 5_000, "the upload to begin");
  abort.abort();
  cut.disconnect();
  await put;
  // The download streams as the upload arrives: cut with it, never ended cleanly (the last chunk waits for the digest).
  const failed = await download;
  t.equal(failed.status, 200, "the download began with the upload");
  await t.rejects(failed.arrayBuffer(), "and is aborted when the device goes: partial bytes never pass for the file");
  await eventually(async () => (await readdir(path.join(blobDir, "tmp"))).length === 0, 5_000, "the partial upload to be removed");
  t.same(
    (await readdir(blobDir)).filter((name) => name !== "tmp"),
    [],
    "nothing kept",
  );

  const back = new ScriptedDevice(server.url, deviceId, token);
  await back.hello([readTool]);
  await back.connect();
  t.teardown(() => back.disconnect());
  const retry = fetch(url);
  const second = await back.nextCall();
  t.not(second.input.url, upload.input.url, "a fresh upload URL");
  const stale = await fetch(upload.input.url, { method: "PUT", body: new Uint8Array(bytes) });
  t.equal((await readJson(stale)).code, "BLOB_URL_USED", "the cut attempt's URL is dead");
  const done = await fetch(second.input.url, { method: "PUT", body: new Uint8Array(bytes) });
  t.equal(done.status, 200);
  await back.postResult({ id: second.id, ok: true, result: { uploaded: true, size: bytes.length, sha256: source.sha256 } });
  const ok = await retry;
  t.equal(ok.status, 200);
  t.ok(Buffer.from(await ok.arrayBuffer()).equals(bytes), "the retry started over and completed");

  t.equal((await owner.delete(`/api/host/devices/${deviceId}`)).status, 204);
  await eventually(async () => (await readdir(blobDir)).filter((name) => name !== "tmp").length === 0, 5_000, "the revoked device's blobs to be deleted");
  t.equal((await fetch(url)).status, 404, "its URL finds nothing");
});
