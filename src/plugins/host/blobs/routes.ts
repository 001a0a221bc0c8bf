import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import path from "node:path";
import { Readable } from "node:stream";
import { HttpError } from "../../../http/errors.js";
import { jsonResponses } from "../../../http/response-schemas.js";
import { strictValidatorCompiler } from "../../../http/strict-validator.js";
import { hostCaller } from "../callers.js";
import { toHttpError } from "../errors.js";
import * as audit from "../audit.js";
import { blobDetail } from "./device-blobs.js";
import { BlobHandleJson, BlobUploadJson } from "./schemas.js";
import type { BlobService } from "./service.js";
import { BLOB_STATUS, BlobError, type ByteRange } from "./store.js";
import type { BlobRecord } from "./repository.js";

const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
const TokenQuery = Type.Object({ t: Type.Optional(Type.String({ maxLength: 4096 })) }, { additionalProperties: false });
/** The blob's bytes, streamed (a stream is never serialised); errors are the shared JSON body. */
const BlobBytes = Type.Unsafe<unknown>({ description: "the blob's bytes (Content-Type is the blob's)" });
const NewBlobBody = Type.Object(
  {
    size: Type.Integer({ minimum: 0 }),
    digest: Type.String({ pattern: "^[0-9a-f]{64}$" }),
    contentType: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: "^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$" })),
  },
  { additionalProperties: false },
);

/** A blob refusal as the API answers it; everything else goes to the app's one error handler. */
export function blobHttpError(error: unknown): unknown {
  if (error instanceof BlobError) return new HttpError(BLOB_STATUS[error.code], error.code, error.message);
  return error;
}

/**
 * `/api/host/blobs`: a caller makes a blob to upload (for write_file), uploads to its signed URL, and
 * downloads blobs through theirs. The URL is the capability; a request that also names a signed-in user
 * must be the blob's owner. Bodies are streams end to end: the upload is never buffered (no body limit
 * applies to it; the announced size does) and the download is the store's stream.
 */
export function blobRoutes(blobs: BlobService): FastifyPluginAsyncTypebox {
  return async (fastify) => {
    fastify.setValidatorCompiler(strictValidatorCompiler);
    fastify.setErrorHandler(async (error) => {
      throw blobHttpError(toHttpError(error));
    });
    // The upload's body is passed on as the raw request stream: no parser reads it, no body limit buffers it.
    fastify.removeAllContentTypeParsers();
    fastify.addContentTypeParser("*", (_request, _payload, done) => done(null));
    fastify.addContentTypeParser("application/json", { parseAs: "string", bodyLimit: 16 * 1024 }, fastify.getDefaultJsonParser("error", "error"));

    fastify.post("/api/host/blobs", { schema: { body: NewBlobBody, response: jsonResponses({ 201: BlobUploadJson }) } }, async (request, reply) => {
      const { userId } = await hostCaller(request);
      const { size, digest, contentType } = request.body;
      const blob = await blobs.create({ userId, deviceId: null, path: null, size, digest, contentType: contentType ?? "application/octet-stream" });
      const upload = await blobs.uploadUrl(blob);
      return reply.code(201).send({ blob: blobs.handle(blob), upload });
    });

    fastify.put(
      "/api/host/blobs/:id",
      { schema: { params: IdParams, querystring: TokenQuery, response: jsonResponses({ 200: Type.Object({ blob: BlobHandleJson }) }) } },
      async (request, reply) => {
        const declared = request.headers["content-length"];
        if (declared === undefined && request.headers["transfer-encoding"] === undefined)
          throw new HttpError(411, "LENGTH_REQUIRED", "Send the blob's bytes with a Content-Length");
        try {
          const blob = await blobs.receive(request.params.id, request.query.t, request.raw, await signedInUser(request));
          return { blob: blobs.handle(blob) };
        } catch (error) {
          // A refusal may come before the body was read to its end: close the connection rather than read the rest.
          if (!request.raw.complete) void reply.header("connection", "close");
          throw error;
        }
      },
    );

    fastify.get(
      "/api/host/blobs/:id",
      { schema: { params: IdParams, querystring: TokenQuery, response: jsonResponses({ 200: BlobBytes, 206: BlobBytes, 307: BlobBytes }) } },
      async (request, reply) => {
        const signedIn = await signedInUser(request);
        const { blob } = await blobs.granted(request.params.id, request.query.t, "get", signedIn);
        // The first download streams while the device uploads (embedded store, whole file); a range, or a bucket, waits for it.
        const streamed = !blob.complete && !blobs.store.presignPut && !request.headers.range;
        const first = blob.complete ? blob : streamed ? await blobs.follow(blob) : await blobs.fetchFromDevice(blob);
        const ready = first instanceof Readable ? blob : first;
        // Who fetched which file: the owner signed in, or whoever held the URL.
        if (fastify.hasDecorator("tetherAudit")) {
          audit.record(fastify.tetherAudit, {
            userId: blob.userId,
            deviceId: blob.deviceId,
            actor: signedIn ? "session" : "url",
            event: "blob_fetch",
            outcome: "ok",
            detail: { ...blobDetail(blob), ...(request.headers.range ? { range: request.headers.range } : {}) },
          });
        }
        // A bucket serves the bytes itself (ranges included): the replica only signs the way there.
        if (blobs.store.presignGet) {
          const url = await blobs.store.presignGet(ready.id, new Date(Date.now() + 5 * 60_000), {
            contentType: ready.contentType,
            ...(ready.path ? { fileName: path.basename(ready.path) } : {}),
          });
          return reply.code(307).header("cache-control", "private, no-store").redirect(url, 307);
        }
        return sendBlob(blobs, ready, request, reply, first instanceof Readable ? first : undefined);
      },
    );
  };
}

/** The signed-in user behind the request, if any (a device's bearer token is none). */
async function signedInUser(request: FastifyRequest): Promise<string | undefined> {
  const session = await request.getSession().catch(() => null);
  return session?.user.id;
}

/** The whole blob (200) or one range of it (206), streamed from the store (or `live`, as it uploads), with its digest as the ETag. */
async function sendBlob(blobs: BlobService, blob: BlobRecord, request: FastifyRequest, reply: FastifyReply, live?: Readable) {
  const etag = `"${blob.digest}"`;
  reply.header("etag", etag).header("accept-ranges", "bytes").header("cache-control", "private, no-store").type(blob.contentType);
  reply.header("x-content-type-options", "nosniff");
  if (blob.path) reply.header("content-disposition", `attachment; filename*=UTF-8''${encodeURIComponent(path.basename(blob.path))}`);
  if (live) return reply.header("content-length", blob.size).send(live);
  const ifRange = request.headers["if-range"];
  const range = parseRange(request.headers.range, blob.size, Array.isArray(ifRange) ? ifRange[0] : ifRange, etag);
  if (range === "invalid") {
    reply.header("content-range", `bytes */${blob.size}`);
    throw new BlobError("BLOB_RANGE_INVALID", `The range is outside the blob's ${blob.size} bytes`);
  }
  const stream = await blobs.open(blob, range);
  if (range) {
    reply
      .code(206)
      .header("content-range", `bytes ${range.start}-${range.end}/${blob.size}`)
      .header("content-length", range.end - range.start + 1);
  } else {
    reply.header("content-length", blob.size);
  }
  return reply.send(stream);
}

/** One `bytes=` range (the first, when several are asked for); undefined for the whole blob. */
export function parseRange(header: string | undefined, size: number, ifRange: string | undefined, etag: string): ByteRange | "invalid" | undefined {
  if (!header) return undefined;
  if (ifRange !== undefined && ifRange !== etag) return undefined;
  const match = /^bytes=(\d*)-(\d*)(?:,.*)?$/.exec(header.trim());
  if (!match || (match[1] === "" && match[2] === "")) return undefined;
  let start: number;
  let end: number;
  if (match[1] === "") {
    const suffix = Number(match[2]);
    if (suffix === 0) return "invalid";
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(match[1]);
    end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
  }
  if (start >= size || end < start) return "invalid";
  return { start, end };
}
