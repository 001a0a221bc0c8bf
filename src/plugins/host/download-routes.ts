import { createReadStream } from "node:fs";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { notFound } from "../../http/errors.js";
import { jsonResponses } from "../../http/response-schemas.js";
import type { DownloadCatalog } from "./downloads.js";
import { DOWNLOADS_PATH } from "./downloads.js";
import { MANIFEST_FILE } from "../../protocol/manifest.js";

/**
 * Public: the executables are no secret, and a script installs with
 * `curl -fLO https://tether.example.com/downloads/tether-host-linux-x64`.
 *
 * - `GET /downloads/<file>`: the executable, `Content-Disposition: attachment`, its SHA-256 as ETag;
 * - `GET /downloads/<file>.sha256`: `sha256sum -c` input;
 * - `GET /downloads/manifest.json`: the signed release manifest, byte for byte as built (what `tether-host update` verifies);
 * - `GET /api/host/downloads`: `{ version, downloads: [{ platform, file, size, sha256, path }] }`.
 */
const Download = Type.Object({ platform: Type.String(), file: Type.String(), size: Type.Integer(), sha256: Type.String(), path: Type.String() });
const Listing = Type.Object({ version: Type.String(), downloads: Type.Array(Download) });
const FileParams = Type.Object({ file: Type.String({ minLength: 1, maxLength: 100 }) });

const contentType = (file: string) => (file.endsWith(".exe") ? "application/vnd.microsoft.portable-executable" : "application/octet-stream");

export const downloadRoutes: FastifyPluginAsyncTypebox<{ catalog: DownloadCatalog }> = async (fastify, { catalog }) => {
  fastify.get("/api/host/downloads", { schema: { response: jsonResponses({ 200: Listing }) } }, async () => ({
    version: await catalog.version(),
    downloads: await catalog.list(),
  }));

  // Registered before the parametric route: Fastify prefers the static path.
  fastify.get(`${DOWNLOADS_PATH}/${MANIFEST_FILE}`, async (_request, reply) => {
    const manifest = await catalog.manifest();
    if (!manifest) throw notFound("This server offers no signed release manifest: its operator builds one with npm run build:host.");
    return reply.type("application/json; charset=utf-8").header("cache-control", "no-cache").send(manifest);
  });

  fastify.get(`${DOWNLOADS_PATH}/:file`, { schema: { params: FileParams } }, async (request, reply) => {
    const wantsChecksum = request.params.file.endsWith(".sha256");
    const download = await catalog.find(wantsChecksum ? request.params.file.slice(0, -".sha256".length) : request.params.file);
    if (!download) throw notFound("No such download. GET /api/host/downloads lists what this server offers.");
    if (wantsChecksum) return reply.type("text/plain; charset=utf-8").send(`${download.sha256}  ${download.file}\n`);
    return reply
      .type(contentType(download.file))
      .header("content-disposition", `attachment; filename="${download.file}"`)
      .header("content-length", download.size)
      .header("etag", `"${download.sha256}"`)
      .header("x-checksum-sha256", download.sha256)
      .header("cache-control", "no-cache")
      .send(createReadStream(download.absolutePath));
  });
};
