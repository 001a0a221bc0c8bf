import multipart from "@fastify/multipart";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Readable } from "node:stream";
import { HttpError } from "../../http/errors.js";
import { hostCaller } from "../../plugins/host/callers.js";
import { hostRefusal } from "../../plugins/host/errors.js";
import { MAX_BLOB_BYTES } from "../../plugins/host/blobs/service.js";
import { stageUpload, type StagedUpload } from "../../plugins/host/blobs/staged-upload.js";
import { BlobError } from "../../plugins/host/blobs/store.js";
import { proposalView, type ProposalView } from "../proposal-view.js";

/** The tool that takes an upload, and the form fields the upload form sends besides the file. */
export const UPLOAD_TOOL = "write_file";
const MAX_PATH_CHARS = 4096;
const CONTENT_TYPE = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+$/;

/** What the dashboard lends the upload route: its tool panel, and how it shows one (a page, or the panel for htmx). */
export interface UploadPanel {
  device: { id: string; name: string };
  error?: string;
  errorField?: string;
  proposal?: ProposalView;
}
export interface UploadRouteOptions<P extends UploadPanel> {
  toolPanel(owner: string, deviceId: string, tool: string): Promise<P>;
  show(request: FastifyRequest, reply: FastifyReply, panel: P, status: number): unknown;
}

const DeviceParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });

/**
 * `POST /devices/:id/upload`: write_file with a file from the browser. The multipart body (a plain form post,
 * or htmx's FormData) is read part by part (`@fastify/multipart`, registered in this context only): the file
 * streamed to a staging file while counted and hashed (never whole in memory, stopped at the store's limit or the
 * owner's quota), made a blob, then proposed as `write_file { path, blob }`, so the owner sees the usual proposal
 * (a diff for text; size, type and sha256 for binary). Refusals are messages on the form with the API's status
 * (413, 429, 4xx for a body that is not a readable form), never JSON and never a 500. The origin check is the
 * app's, as for every other form.
 */
export function uploadRoute<P extends UploadPanel>(options: UploadRouteOptions<P>): FastifyPluginAsyncTypebox {
  return async (fastify) => {
    await fastify.register(multipart, { limits: { fields: 5, fieldSize: MAX_PATH_CHARS * 4, files: 1, parts: 8, headerPairs: 100 } });
    const blobs = fastify.tetherBlobs;

    fastify.post("/devices/:id/upload", { schema: { params: DeviceParams } }, async (request, reply) => {
      const caller = await hostCaller(request);
      const panel = await options.toolPanel(caller.userId, request.params.id, UPLOAD_TOOL);
      const refuse = (status: number, message: string, field?: string) => {
        panel.error = message;
        if (field) panel.errorField = field;
        if (!request.raw.complete) void reply.header("connection", "close");
        return options.show(request, reply, panel, status);
      };
      if (!request.isMultipart()) return refuse(415, "Send the file as a form upload (multipart/form-data). (NOT_MULTIPART)");
      let staged: StagedUpload | undefined;
      try {
        const form = await readUploadForm(request, (body) => stageWithin(blobs, caller.userId, body, (s) => (staged = s))).catch((error: unknown) => {
          throw unreadable(error);
        });
        if (!form.path) return await refuse(400, "Give the path to write the file to. (INVALID_INPUT)", "path");
        if (!staged || !form.file) return await refuse(400, "Choose a file to upload. (INVALID_INPUT)", "file");
        const blob = await blobs.adopt({ userId: caller.userId, deviceId: null, path: null, contentType: form.file.contentType }, staged);
        const outcome = await fastify.tetherHost.call(caller, { deviceId: panel.device.id, tool: UPLOAD_TOOL, input: { path: form.path, blob: blob.id } });
        if (outcome.kind !== "proposal") return await refuse(502, "The device wrote nothing: it answered without a proposal. (UNEXPECTED_RESULT)");
        panel.proposal = proposalView(outcome.proposal, outcome.proposal.diff ?? "", panel.device.name);
        return await options.show(request, reply, panel, 202);
      } catch (error) {
        const refusal = hostRefusal(error);
        return refuse(refusal.statusCode, `${refusal.message} (${refusal.code})`);
      } finally {
        await staged?.discard();
      }
    });
  };
}

interface UploadForm {
  path?: string;
  file?: { name: string; contentType: string };
}

/** Reads the form's parts in order: `path` (a field), `file` (the one file, handed to `stage` as it arrives). */
async function readUploadForm(request: FastifyRequest, stage: (body: Readable) => Promise<void>): Promise<UploadForm> {
  const form: UploadForm = {};
  for await (const part of request.parts()) {
    if (part.type === "file") {
      if (part.fieldname !== "file" || form.file || !part.filename) {
        part.file.resume();
        continue;
      }
      const contentType = CONTENT_TYPE.test(part.mimetype) ? part.mimetype.toLowerCase() : "application/octet-stream";
      form.file = { name: part.filename, contentType };
      await stage(part.file);
    } else if (part.fieldname === "path" && typeof part.value === "string") {
      form.path = part.value.trim().slice(0, MAX_PATH_CHARS);
    }
  }
  return form;
}

/** Stages the file within the store's limit and the owner's room under the quota (checked again, exactly, on adoption). */
async function stageWithin(
  blobs: FastifyRequest["server"]["tetherBlobs"],
  userId: string,
  body: Readable,
  keep: (staged: StagedUpload) => void,
): Promise<void> {
  const maxBytes = Math.min(MAX_BLOB_BYTES, blobs.quotaBytes);
  const roomBytes = blobs.quotaBytes - (await blobs.usage(userId));
  if (roomBytes <= 0)
    throw new BlobError("BLOB_QUOTA_EXCEEDED", `Your blobs already take all of your ${blobs.quotaBytes} bytes; nothing was kept. Blobs expire by themselves.`);
  keep(await stageUpload(blobs.stagingDir, body, { maxBytes, roomBytes }));
}

/**
 * What broke while the form was read: a refusal of ours (413, 429, 507) as it is, a limit of the multipart
 * reader as its 4xx, and anything else (a malformed or cut-off body) as 400, since it is the body's fault.
 */
function unreadable(error: unknown): unknown {
  if (error instanceof BlobError || error instanceof HttpError) return error;
  const status = (error as { statusCode?: unknown } | undefined)?.statusCode;
  const code = (error as { code?: unknown } | undefined)?.code;
  const message = error instanceof Error ? error.message : String(error);
  if (typeof status === "number" && status >= 400 && status < 500)
    return new HttpError(status, typeof code === "string" ? code : "INVALID_UPLOAD", `${message}; nothing was kept`);
  return new HttpError(400, "INVALID_UPLOAD", `The upload could not be read as a form (${message}); nothing was kept`);
}
