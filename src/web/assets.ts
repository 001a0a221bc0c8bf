import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import fp from "fastify-plugin";
import { notFound } from "../http/errors.js";
import { PUBLIC_DIR } from "./locations.js";

/** Versioned URLs of the static files, for templates (`it.assets.css`, …). */
export interface AssetUrls {
  css: string;
  js: string;
  htmx: string;
  icon: string;
  /** htmx's SSE extension and the /devices page's stylesheet (src/web/routes/devices-dashboard.ts). */
  sse: string;
  devicesCss: string;
  /** The WebAuthn script of the sign-in and security pages (only when passkeys are on). */
  passkeys: string;
}

declare module "fastify" {
  interface FastifyInstance {
    tetherAssets: AssetUrls;
  }
}

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
  /** Short content hash carried in the URL (`?v=`); a URL with the current hash is immutable. */
  version: string;
}

const require = createRequire(import.meta.url);

/** Every file the site serves, by its public name. Nothing else under /assets exists. */
const SOURCES = {
  "app.css": { file: path.join(PUBLIC_DIR, "app.css"), type: "text/css; charset=utf-8" },
  "app.js": { file: path.join(PUBLIC_DIR, "app.js"), type: "text/javascript; charset=utf-8" },
  "icon.svg": { file: path.join(PUBLIC_DIR, "icon.svg"), type: "image/svg+xml" },
  // htmx from node_modules, served from our own origin: no CDN, works offline.
  "htmx.min.js": { file: require.resolve("htmx.org/dist/htmx.min.js"), type: "text/javascript; charset=utf-8" },
  "hx-sse.min.js": { file: require.resolve("htmx.org/dist/ext/hx-sse.min.js"), type: "text/javascript; charset=utf-8" },
  "devices.css": { file: path.join(PUBLIC_DIR, "devices.css"), type: "text/css; charset=utf-8" },
  "passkeys.js": { file: path.join(PUBLIC_DIR, "passkeys.js"), type: "text/javascript; charset=utf-8" },
} as const;

type AssetName = keyof typeof SOURCES;
const ASSET_NAMES = Object.keys(SOURCES) as AssetName[];

const AssetParams = Type.Object({ name: Type.String({ maxLength: 64 }) });
const AssetQuery = Type.Object({ v: Type.Optional(Type.String({ maxLength: 64 })) });

function load(name: AssetName): Asset {
  const { file, type } = SOURCES[name];
  const body = readFileSync(file);
  const hash = createHash("sha256").update(body).digest("base64url");
  return { body, type, etag: `"${hash.slice(0, 27)}"`, version: hash.slice(0, 12) };
}

const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  // Read once at start-up: a handful of small files, served from memory.
  const assets = new Map(ASSET_NAMES.map((name) => [name as string, load(name)]));
  const url = (name: AssetName) => `/assets/${name}?v=${assets.get(name)!.version}`;
  fastify.decorate("tetherAssets", {
    css: url("app.css"),
    js: url("app.js"),
    htmx: url("htmx.min.js"),
    icon: url("icon.svg"),
    sse: url("hx-sse.min.js"),
    devicesCss: url("devices.css"),
    passkeys: url("passkeys.js"),
  });

  fastify.get("/assets/:name", { schema: { params: AssetParams, querystring: AssetQuery } }, async (request, reply) => {
    const asset = assets.get(request.params.name);
    if (!asset) throw notFound("No such file");
    // The versioned URL never changes content, so browsers keep it; any other URL revalidates.
    const immutable = request.query.v === asset.version;
    reply.header("cache-control", immutable ? "public, max-age=31536000, immutable" : "no-cache").header("etag", asset.etag);
    if (request.headers["if-none-match"] === asset.etag) return reply.code(304).send();
    return reply.type(asset.type).send(asset.body);
  });
};

/** Serves the stylesheet, our one small script, the icon and htmx, from memory, under `/assets/`. */
export const assetsPlugin = fp(routes, { name: "tether-page-assets", fastify: "5.x", dependencies: ["tether-errors"] });
