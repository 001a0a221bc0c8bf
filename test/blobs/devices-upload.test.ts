/**
 * /devices: write_file from a file the browser uploads (`POST /devices/:id/upload`, multipart), through the
 * real app and the real device runtime. A text file is proposed as a diff, a binary one by size and sha256; the
 * proposal is the usual one, applied on approval. Over the quota is a 429 message on the form; a body that is not
 * a readable form is a 4xx page, never a 500; a post from another origin is refused. Nothing staged stays behind.
 */
import { randomBytes } from "node:crypto";
import { readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { readJson, type TestClient } from "../helpers/client.js";
import { signedIn, startHostServer } from "../host/helpers.js";
import { runtimeDevice, sha256, tempDir } from "./helpers.js";

/** The form as a browser sends it: fields in page order, then the file. */
function uploadForm(filePath: string | undefined, bytes: Buffer, name: string, type: string): FormData {
  const form = new FormData();
  if (filePath !== undefined) form.append("path", filePath);
  form.append("file", new Blob([new Uint8Array(bytes)], { type }), name);
  return form;
}

function postUpload(owner: TestClient, deviceId: string, body: BodyInit, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${owner.baseURL}/devices/${deviceId}/upload`, {
    method: "POST",
    body,
    redirect: "manual",
    headers: { origin: owner.baseURL, cookie: owner.cookieHeader, ...headers },
  });
}

const staged = async (blobDir: string) => readdir(path.join(blobDir, "staging")).catch(() => [] as string[]);

t.test("uploading a file on /devices proposes write_file with it", async (t) => {
  const blobDir = await tempDir(t, "tether-upload-store-");
  const server = await startHostServer(t, { env: { BLOB_DIR: blobDir, BLOB_QUOTA_MB: "1" } });
  const owner = await signedIn(server.url);
  const { root, deviceId } = await runtimeDevice(t, server.url, owner);

  const page = await owner.get(`/devices?device=${deviceId}&tool=write_file`);
  const html = await page.text();
  t.match(html, `enctype="multipart/form-data" action="/devices/${deviceId}/upload"`, "the write_file panel offers an upload form");
  t.match(html, /<input type="file" id="upload-file" name="file" required>/);

  await t.test("a text file, posted as a plain form: the proposal's diff, applied on approval", async (t) => {
    await writeFile(path.join(root, "notes.txt"), "hello\n");
    const response = await postUpload(owner, deviceId, uploadForm("notes.txt", Buffer.from("hello\nworld\n"), "notes.txt", "text/plain"));
    const body = await response.text();
    t.equal(response.status, 202, body.slice(0, 300));
    t.match(response.headers.get("content-type"), /text\/html/);
    t.match(body, /<html/i, "a whole page without JavaScript");
    t.match(body, /Proposed:/);
    t.match(body, /\+world/, "the diff");
    t.equal(await readFile(path.join(root, "notes.txt"), "utf8"), "hello\n", "nothing written before approval");
    const pending = await readJson(await owner.get("/api/host/proposals"));
    t.equal(pending.total, 1, "one proposal waits");
    const proposal = await readJson(await owner.get(`/api/host/proposals/${pending.proposals[0].id}`));
    t.match(proposal.input, { path: "notes.txt", blob: /^b_/ }, "write_file with the uploaded blob");
    t.equal((await owner.post("/api/host/approve", { proposalId: proposal.id })).status, 200);
    t.equal(await readFile(path.join(root, "notes.txt"), "utf8"), "hello\nworld\n", "applied");
  });

  await t.test("a binary file, with htmx: the panel alone, with the size and sha256", async (t) => {
    const bytes = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0]), randomBytes(200_000)]);
    const response = await postUpload(owner, deviceId, uploadForm("img/logo.png", bytes, "logo.png", "image/png"), { "hx-request": "true" });
    const body = await response.text();
    t.equal(response.status, 202, body.slice(0, 300));
    t.notMatch(body, /<html/i, "a fragment for htmx");
    t.match(body, /id="tool-panel"/);
    t.match(body, sha256(bytes), "the new content's sha256");
    t.match(body, "image/png");
  });

  await t.test("over the quota: 429 on the form, nothing kept", async (t) => {
    const before = await readJson(await owner.get("/api/host/proposals"));
    const response = await postUpload(owner, deviceId, uploadForm("big.bin", randomBytes(1_100_000), "big.bin", "application/octet-stream"));
    const body = await response.text();
    t.equal(response.status, 429, body.slice(0, 300));
    t.match(response.headers.get("content-type"), /text\/html/, "a page, not JSON");
    t.match(body, /BLOB_QUOTA_EXCEEDED/);
    t.match(body, /id="tool-error"/, "the message is on the form");
    t.same(await staged(blobDir), [], "no staged file left");
    const after = await readJson(await owner.get("/api/host/proposals"));
    t.equal(after.total, before.total, "no proposal made");
  });

  await t.test("bodies that are not a readable upload form: 4xx pages, never a 500", async (t) => {
    const cases: [string, BodyInit, Record<string, string>][] = [
      ["url-encoded form", "path=x.txt&file=abc", { "content-type": "application/x-www-form-urlencoded" }],
      ["plain text", "hello", { "content-type": "text/plain" }],
      ["no boundary", "--x\r\n", { "content-type": "multipart/form-data" }],
      [
        "cut off mid-part",
        '--xyz\r\nContent-Disposition: form-data; name="path"\r\n\r\nx.txt\r\n--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nabc',
        { "content-type": "multipart/form-data; boundary=xyz" },
      ],
      ["garbage headers", "--xyz\r\n\u0000\u0001garbage\r\n\r\n--xyz--\r\n", { "content-type": "multipart/form-data; boundary=xyz" }],
    ];
    for (const [label, body, headers] of cases) {
      const response = await postUpload(owner, deviceId, body, headers);
      const text = await response.text();
      t.ok(response.status >= 400 && response.status < 500, `${label}: ${response.status} ${text.slice(0, 200)}`);
      t.match(response.headers.get("content-type"), /text\/html/, `${label}: a page`);
    }
    const noPath = await postUpload(owner, deviceId, uploadForm(undefined, Buffer.from("x"), "x.txt", "text/plain"));
    t.equal(noPath.status, 400);
    t.match(await noPath.text(), /Give the path/);
    const noFile = new FormData();
    noFile.append("path", "x.txt");
    const withoutFile = await postUpload(owner, deviceId, noFile);
    t.equal(withoutFile.status, 400);
    t.match(await withoutFile.text(), /Choose a file/);
    t.same(await staged(blobDir), [], "no staged file left");
  });

  await t.test("a post from another origin is refused before anything is read", async (t) => {
    const response = await postUpload(owner, deviceId, uploadForm("evil.txt", Buffer.from("x"), "x.txt", "text/plain"), { origin: "https://evil.example" });
    t.equal(response.status, 403);
    await response.body?.cancel();
    t.same((await readdir(root)).sort(), ["notes.txt"], "nothing proposed or written");
  });
});
