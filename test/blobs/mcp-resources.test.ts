/**
 * MCP `resources/read` for blobs, with the official SDK v2 client: the `resource_link` of a large or binary
 * read is readable through MCP (text as text, binary as base64), fetched from the device on first read; past the
 * size limit the error gives the download URL; another user's client, or a URI that is not a blob's, finds nothing.
 */
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { MCP_RESOURCE_MAX_BYTES } from "../../src/plugins/mcp/blob-resources.js";
import { mintToken } from "../helpers/auth.js";
import { signedIn, startHostServer } from "../host/helpers.js";
import { connectV2 } from "../mcp/v2.js";
import { runtimeDevice, tempDir } from "./helpers.js";

t.test("blob resource_links are readable through resources/read", async (t) => {
  const blobDir = await tempDir(t, "tether-mcp-blob-store-");
  const server = await startHostServer(t, { env: { BLOB_DIR: blobDir } });
  const owner = await signedIn(server.url);
  const { root, deviceId } = await runtimeDevice(t, server.url, owner);
  const line = "résumé line — the quick brown fox\n";
  const text = line.repeat(Math.ceil((1.5 * 1024 * 1024) / Buffer.byteLength(line)));
  await writeFile(path.join(root, "big.log"), text);
  const binary = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]), randomBytes(300_000)]);
  await writeFile(path.join(root, "image.png"), binary);
  await writeFile(path.join(root, "huge.bin"), Buffer.concat([Buffer.from([0, 1, 2, 0]), randomBytes(MCP_RESOURCE_MAX_BYTES + 10)]));

  const token = await mintToken(owner, { scopes: ["host:call"] });
  for (const revision of ["2026-07-28", "2025-11-25"] as const) {
    const client = await connectV2(t, server.url, token, revision);
    t.ok(client.getServerCapabilities()?.resources, `${revision}: the server offers resources`);
    const linkOf = async (file: string) => {
      const result = await client.callTool({ name: "read_file", arguments: { device: deviceId, path: file } });
      const link = result.content.find((part) => part.type === "resource_link") as { uri: string } | undefined;
      if (!link) throw new Error(`no resource_link for ${file}: ${JSON.stringify(result).slice(0, 300)}`);
      return link.uri;
    };

    const textURI = await linkOf("big.log");
    const readText = await client.readResource({ uri: textURI });
    t.match(readText.contents[0], { uri: textURI, mimeType: /^text\/plain/ }, `${revision}: the text file`);
    t.equal((readText.contents[0] as { text?: string }).text, text, `${revision}: as text, whole (beyond read_file's 1 MB), fetched from the device`);

    const imageURI = await linkOf("image.png");
    const readImage = await client.readResource({ uri: imageURI });
    t.match(readImage.contents[0], { uri: imageURI, mimeType: "image/png" });
    t.ok(Buffer.from((readImage.contents[0] as { blob: string }).blob, "base64").equals(binary), `${revision}: binary as base64 blob contents`);

    const hugeURI = await linkOf("huge.bin");
    await t.rejects(
      client.readResource({ uri: hugeURI }),
      { message: /download it from its URL instead.*\/api\/host\/blobs\/b_/ },
      `${revision}: over the limit, the error gives the URL`,
    );
    await t.rejects(
      client.readResource({ uri: "file:///etc/passwd" }),
      { message: /Not a Tether blob URI/ },
      `${revision}: a URI that is not a blob's is not found`,
    );
  }

  const stranger = await signedIn(server.url);
  const strangerClient = await connectV2(t, server.url, await mintToken(stranger, { scopes: ["host:call"] }), "2026-07-28");
  const ownerClient = await connectV2(t, server.url, token, "2026-07-28");
  const result = await ownerClient.callTool({ name: "read_file", arguments: { device: deviceId, path: "image.png" } });
  const uri = (result.content.find((part) => part.type === "resource_link") as { uri: string }).uri;
  await t.rejects(strangerClient.readResource({ uri }), { message: /You have no blob with this id/ }, "another user's blob is not found, even with its URL");
});
