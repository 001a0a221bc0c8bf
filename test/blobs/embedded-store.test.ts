/**
 * Blobs on the embedded store, through the example app over HTTP: a caller makes a blob, uploads it through its
 * single-use signed URL, and downloads it (whole, by range) with its digest as the ETag; bytes that do not match
 * what was announced are refused with nothing kept; altered, expired, reused and other-user URLs are refused;
 * the quota, the retention sweep and a full disk.
 */
import { createHash, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { startTestApp } from "../helpers/app.js";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import { IN_CI } from "../helpers/database.js";
import { eventually } from "../helpers/eventually.js";

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

async function setUp(t: Test, env: Record<string, string> = {}) {
  const dir = await mkdtemp(path.join(tmpdir(), "tether-blobs-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const server = await startTestApp(t, { env: { BLOB_DIR: dir, ...env } });
  const owner = new TestClient(server.url);
  await owner.signUp(uniqueEmail("blobs"));
  return { ...server, dir, owner };
}

async function makeBlob(owner: TestClient, bytes: Buffer, extra: Record<string, unknown> = {}) {
  const response = await owner.post("/api/host/blobs", { size: bytes.length, digest: sha256(bytes), contentType: "application/octet-stream", ...extra });
  return { status: response.status, body: await readJson(response) };
}

const upload = (url: string, body: Buffer | string, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "PUT",
    body: typeof body === "string" ? body : new Uint8Array(body),
    headers: { "content-type": "application/octet-stream", ...headers },
  });

/** Files the store holds (its temp folder aside): nothing partial may stay behind. */
async function storedFiles(dir: string): Promise<string[]> {
  const top = (await readdir(dir).catch(() => [] as string[])).filter((name) => name !== "tmp");
  const temp = await readdir(path.join(dir, "tmp")).catch(() => [] as string[]);
  return [...top, ...temp.map((name) => `tmp/${name}`)];
}

t.test("upload once, download whole and by range, with the digest as the ETag", async (t) => {
  const { owner, dir } = await setUp(t);
  const bytes = randomBytes(300_000);
  const made = await makeBlob(owner, bytes);
  t.equal(made.status, 201);
  const { blob, upload: put } = made.body;
  t.match(blob, { size: bytes.length, digest: sha256(bytes), contentType: "application/octet-stream" });

  const early = await fetch(blob.url);
  t.equal(early.status, 409, "not uploaded yet: the download says so");
  t.equal((await readJson(early)).code, "BLOB_INCOMPLETE");

  const uploaded = await upload(put.url, bytes);
  t.equal(uploaded.status, 200, "the upload is taken");
  t.equal((await readJson(uploaded)).blob.digest, sha256(bytes));
  const again = await upload(put.url, bytes);
  t.equal(again.status, 409, "the upload URL works once");
  t.equal((await readJson(again)).code, "BLOB_URL_USED");

  const whole = await fetch(blob.url);
  t.equal(whole.status, 200);
  t.equal(whole.headers.get("content-length"), String(bytes.length));
  t.equal(whole.headers.get("etag"), `"${sha256(bytes)}"`);
  t.equal(whole.headers.get("content-type"), "application/octet-stream");
  t.ok(Buffer.from(await whole.arrayBuffer()).equals(bytes), "the same bytes come back");

  const part = await fetch(blob.url, { headers: { range: "bytes=1000-1999" } });
  t.equal(part.status, 206);
  t.equal(part.headers.get("content-range"), `bytes 1000-1999/${bytes.length}`);
  t.ok(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(1000, 2000)), "the range's bytes");
  const tail = await fetch(blob.url, { headers: { range: "bytes=-10" } });
  t.ok(Buffer.from(await tail.arrayBuffer()).equals(bytes.subarray(-10)), "a suffix range");
  const outside = await fetch(blob.url, { headers: { range: `bytes=${bytes.length}-` } });
  t.equal(outside.status, 416);
  t.equal((await readJson(outside)).code, "BLOB_RANGE_INVALID");
  t.same(await storedFiles(dir), [blob.id], "one file, nothing left in the temp folder");
});

t.test("a body that is not what was announced is refused and nothing is kept; a new URL starts over", async (t) => {
  const { owner, dir } = await setUp(t);
  const bytes = randomBytes(50_000);
  const { blob, upload: put } = (await makeBlob(owner, bytes)).body;
  const other = Buffer.from(bytes);
  other[100] = 255 - other[100]!;
  const wrongDigest = await upload(put.url, other);
  t.equal(wrongDigest.status, 422);
  t.equal((await readJson(wrongDigest)).code, "BLOB_DIGEST_MISMATCH");
  t.same(await storedFiles(dir), [], "nothing kept");
  t.equal((await fetch(blob.url)).status, 409, "the blob is still incomplete");

  const second = (await readJson(await owner.post("/api/host/blobs", { size: 10, digest: sha256(randomBytes(10)) }))).upload;
  const tooLong = await upload(second.url, randomBytes(20));
  t.equal((await readJson(tooLong)).code, "BLOB_SIZE_MISMATCH", "longer than announced");
  const third = (await readJson(await owner.post("/api/host/blobs", { size: 10, digest: sha256(randomBytes(10)) }))).upload;
  t.equal((await readJson(await upload(third.url, randomBytes(5)))).code, "BLOB_SIZE_MISMATCH", "shorter than announced");
  t.same(await storedFiles(dir), [], "still nothing kept");
});

t.test("altered, other-user and wrong-direction URLs are refused", async (t) => {
  const { owner, url } = await setUp(t);
  const bytes = randomBytes(1000);
  const { blob, upload: put } = (await makeBlob(owner, bytes)).body;
  t.equal((await upload(put.url, bytes)).status, 200);

  const parsed = new URL(blob.url);
  const token = parsed.searchParams.get("t")!;
  const [body, mac] = token.split(".");
  const payload = JSON.parse(Buffer.from(body!, "base64url").toString());
  const forged = `${Buffer.from(JSON.stringify({ ...payload, s: 999 })).toString("base64url")}.${mac}`;
  for (const [what, href] of [
    ["a changed payload", `${parsed.origin}${parsed.pathname}?t=${encodeURIComponent(forged)}`],
    ["a changed signature", `${parsed.origin}${parsed.pathname}?t=${encodeURIComponent(`${body}.${mac!.slice(0, -2)}AA`)}`],
    ["no signature", `${parsed.origin}${parsed.pathname}`],
    ["the upload URL used to download", put.url],
  ] as const) {
    const response = await fetch(href);
    t.equal(response.status, 403, what);
    t.equal((await readJson(response)).code, "BLOB_URL_INVALID", what);
  }
  const otherBlob = (await makeBlob(owner, randomBytes(10))).body.blob;
  const swapped = await fetch(`${url}/api/host/blobs/${otherBlob.id}?t=${encodeURIComponent(token)}`);
  t.equal((await readJson(swapped)).code, "BLOB_URL_INVALID", "a URL for one blob does not open another");

  const mallory = new TestClient(url);
  await mallory.signUp(uniqueEmail("mallory"));
  const stolen = await fetch(blob.url, { headers: { cookie: mallory.cookieHeader } });
  t.equal(stolen.status, 403, "another signed-in user is refused");
  t.equal((await readJson(stolen)).code, "BLOB_WRONG_USER");
  const own = await fetch(blob.url, { headers: { cookie: owner.cookieHeader } });
  t.equal(own.status, 200, "the owner, signed in, is not");
  t.ok(Buffer.from(await own.arrayBuffer()).equals(bytes));
});

t.test("an expired URL is refused, download and upload alike", async (t) => {
  const { owner } = await setUp(t, { BLOB_URL_TTL: "1s" });
  const bytes = randomBytes(1000);
  const { blob, upload: put } = (await makeBlob(owner, bytes)).body;
  await eventually(async () => (await fetch(blob.url)).status === 410, 5_000, "the URL to expire");
  t.equal((await readJson(await fetch(blob.url))).code, "BLOB_URL_EXPIRED");
  const late = await upload(put.url, bytes);
  t.equal(late.status, 410);
  t.equal((await readJson(late)).code, "BLOB_URL_EXPIRED");
});

t.test("the quota: 429 BLOB_QUOTA_EXCEEDED beyond it", async (t) => {
  const { owner } = await setUp(t, { BLOB_QUOTA_MB: "1" });
  t.equal((await makeBlob(owner, randomBytes(600_000))).status, 201);
  const over = await makeBlob(owner, randomBytes(600_000));
  t.equal(over.status, 429);
  t.equal(over.body.code, "BLOB_QUOTA_EXCEEDED");
  t.match(over.body.message, /does not fit/);
  t.equal((await makeBlob(owner, randomBytes(2 * 1024 * 1024))).body.code, "BLOB_TOO_LARGE", "larger than the whole quota");
  t.equal((await makeBlob(owner, randomBytes(400_000))).status, 201, "what fits still fits");
});

t.test("the retention sweep removes expired blobs, rows and bytes", async (t) => {
  // Two seconds: long enough for the upload on a loaded machine (at one, it sometimes expired first), short to wait.
  const { owner, dir, app } = await setUp(t, { BLOB_RETENTION: "2s" });
  const bytes = randomBytes(2000);
  const { blob, upload: put } = (await makeBlob(owner, bytes)).body;
  t.equal((await upload(put.url, bytes)).status, 200);
  t.same(await storedFiles(dir), [blob.id]);
  await eventually(
    async () => {
      await app.tetherBlobs.sweep();
      return (await storedFiles(dir)).length === 0;
    },
    10_000,
    "the sweep to remove the expired blob",
  );
  t.equal((await fetch(blob.url)).status, 410, "its URL has expired with it");
  t.equal(await app.tetherBlobs.findBlob(blob.id), undefined, "its row is gone");
});

/** A 256 KB tmpfs to fill: needs root (mount); elsewhere the case is skipped with the reason. */
async function smallDisk(): Promise<string | undefined> {
  const mount = await mkdtemp(path.join(tmpdir(), "tether-blobs-full-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", mount], { stdio: "ignore" });
    return mount;
  } catch {
    await rm(mount, { recursive: true, force: true });
    return undefined;
  }
}
const fullDisk = await smallDisk();
if (fullDisk) {
  t.teardown(async () => {
    execFileSync("umount", [fullDisk]);
    await rm(fullDisk, { recursive: true, force: true });
  });
}

// Skipped with the reason where a tmpfs cannot be mounted, except in CI, where the case must run.
t.test(
  "a full disk: 507 with a message, nothing partial kept or served",
  { skip: fullDisk || IN_CI ? false : "a small tmpfs cannot be mounted here (needs root)" },
  async (t) => {
    if (!fullDisk) return t.fail("a small tmpfs cannot be mounted here (needs root), so the full-disk case cannot run");
    const mount = fullDisk;
    const { owner } = await setUp(t, { BLOB_DIR: mount });
    const bytes = randomBytes(1024 * 1024);
    const { blob, upload: put } = (await makeBlob(owner, bytes)).body;
    const response = await upload(put.url, bytes);
    t.equal(response.status, 507);
    const error = await readJson(response);
    t.equal(error.code, "BLOB_STORE_FULL");
    t.match(error.message, /disk is full/);
    t.same(await storedFiles(mount), [], "nothing partial kept");
    t.equal((await fetch(blob.url)).status, 409, "nothing served");
  },
);
