import { ProtocolError, ProtocolErrorCode, ResourceNotFoundError, type ReadResourceResult, type Server } from "@modelcontextprotocol/server";
import type { AuditEntry } from "../host/audit.js";
import { blobDetail } from "../host/blobs/device-blobs.js";
import type { BlobService } from "../host/blobs/service.js";
import { BLOB_ID, BlobError } from "../host/blobs/store.js";
import { DeviceCallError } from "../host/dispatcher.js";
import type { McpCaller } from "./credentials.js";

/** The largest blob `resources/read` returns in the response (text, or base64); larger ones are for their URL. */
export const MCP_RESOURCE_MAX_BYTES = 4 * 1024 * 1024;

/** Media types read as text (when their bytes are UTF-8); everything else is a base64 `blob`. */
const TEXT_TYPE = /^(text\/|application\/(json|xml|javascript|x-ndjson|yaml|x-yaml|toml|x-sh)\b|[^;]*\+(json|xml)\b)/i;

export interface BlobResourceContext {
  blobs: BlobService;
  caller: McpCaller;
  /** The blob URLs' common start (`<base>/api/host/blobs/`): a resource URI is one of these URLs. */
  blobURLPrefix: string;
  audit(entry: AuditEntry): Promise<void>;
}

/**
 * `resources/read` for blobs: the `resource_link` a large or binary read returns (its `uri` is the blob's signed
 * URL) is also readable through MCP, by the blob's owner on a credential that reaches its device (the URL's
 * token is not needed: the request's own credential is the authority). A device blob not uploaded yet is fetched
 * from the device first. Text comes back as text, anything else as base64 `blob` contents; past
 * `MCP_RESOURCE_MAX_BYTES` the answer is an error that gives a fresh download URL instead. `resources/list` is
 * empty: blobs are made by tool calls and expire, there is nothing to browse.
 */
export function serveBlobResources(server: Server, context: BlobResourceContext): void {
  server.setRequestHandler("resources/list", async () => ({ resources: [] }));
  server.setRequestHandler("resources/read", async (request) => readBlobResource(context, request.params.uri));
}

async function readBlobResource(context: BlobResourceContext, uri: string): Promise<ReadResourceResult> {
  const { blobs, caller } = context;
  const id = blobIdOf(uri, context.blobURLPrefix);
  if (!id) throw new ResourceNotFoundError(uri, "Not a Tether blob URI: only the resource_link URIs of tool results can be read");
  try {
    const blob = await blobs.owned(caller.userId, id);
    if (caller.deviceIds && blob.deviceId !== null && !caller.deviceIds.includes(blob.deviceId))
      throw new BlobError("BLOB_NOT_FOUND", "You have no blob with this id");
    if (blob.size > MCP_RESOURCE_MAX_BYTES) {
      const { url } = blobs.handle(blob);
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `This blob is ${blob.size} bytes, over the ${MCP_RESOURCE_MAX_BYTES} bytes resources/read returns: download it from its URL instead (GET supports Range): ${url}`,
        { code: "BLOB_TOO_LARGE_FOR_MCP", size: blob.size, limit: MCP_RESOURCE_MAX_BYTES, url },
      );
    }
    const ready = blob.complete ? blob : await blobs.fetchFromDevice(blob);
    const chunks: Buffer[] = [];
    for await (const chunk of await blobs.open(ready)) chunks.push(chunk as Buffer);
    const bytes = Buffer.concat(chunks);
    await context.audit({
      userId: caller.userId,
      deviceId: blob.deviceId,
      actor: caller.actor,
      credential: caller.credential ?? null,
      event: "blob_fetch",
      outcome: "ok",
      detail: { ...blobDetail(blob), via: "mcp" },
    });
    const text = TEXT_TYPE.test(blob.contentType) ? utf8(bytes) : undefined;
    const base = { uri, mimeType: blob.contentType };
    return { contents: [text !== undefined ? { ...base, text } : { ...base, blob: bytes.toString("base64") }] };
  } catch (error) {
    if (error instanceof BlobError && error.code === "BLOB_NOT_FOUND") throw new ResourceNotFoundError(uri, error.message);
    if (error instanceof BlobError || error instanceof DeviceCallError) {
      throw new ProtocolError(ProtocolErrorCode.InternalError, `${error.code}: ${error.message}`, { code: error.code });
    }
    throw error;
  }
}

/** The blob id a resource URI names, when it is one of this server's blob URLs. */
function blobIdOf(uri: string, prefix: string): string | undefined {
  if (!uri.startsWith(prefix)) return undefined;
  const id = uri.slice(prefix.length).split(/[?#]/)[0]!;
  return BLOB_ID.test(id) ? id : undefined;
}

function utf8(bytes: Buffer): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}
