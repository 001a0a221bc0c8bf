/**
 * The host stream protocol, version 1: the one contract between the server (`src/plugins/host`) and
 * the device runtime (`src/device`), as TypeBox schemas with the types derived from them. Pure data:
 * no I/O, no framework, safe to bundle into the device.
 *
 *   1. `POST /api/host/hello`  (device token, `Tether-Protocol: 1`) announces the device's tools and
 *      roots; the server stores them on the device row.
 *   2. `GET /api/host/stream`  (device token, `Tether-Protocol: 1`) opens the Server-Sent Events
 *      stream. Events: `ready`, `call`, `cancel`, `close`, plus `: keep-alive` comments.
 *   3. `POST /api/host/result/:callId` (device token, `Tether-Protocol: 1`) posts one call's outcome
 *      back. The id is in the path so the server checks it before it reads the (bounded) body.
 *      `POST /api/host/results` carries several small outcomes at once.
 *
 * A device speaking another version gets 400 `PROTOCOL_VERSION_UNSUPPORTED`, naming both versions.
 */
import { Type, type Static } from "@sinclair/typebox";
import { AnnouncedToolSchema, ToolModeSchema, type AnnouncedTool } from "./tool.js";
import { BlobReadSchema } from "./blobs.js";

export const PROTOCOL_VERSION = 1;

/** Request header in which the device names the protocol version it speaks. */
export const PROTOCOL_HEADER = "tether-protocol";

/** The device token's prefix; the rest is 32 random bytes in base64url. */
export const DEVICE_TOKEN_PREFIX = "dt_";

/** `POST /api/host/enroll` body: a pairing code buys a device token. */
export const EnrollBodySchema = Type.Object(
  {
    code: Type.String({ minLength: 1, maxLength: 64 }),
    name: Type.String({ minLength: 1, maxLength: 100 }),
    platform: Type.String({ minLength: 1, maxLength: 100 }),
  },
  { additionalProperties: false },
);
export type EnrollBody = Static<typeof EnrollBodySchema>;

export const EnrollReplySchema = Type.Object({ deviceId: Type.String(), token: Type.String() });
export type EnrollReply = Static<typeof EnrollReplySchema>;

/** `POST /api/host/hello` body. Tool names are also unique (`duplicateToolName`). */
export const HelloBodySchema = Type.Object(
  {
    tools: Type.Array(AnnouncedToolSchema, { maxItems: 256 }),
    roots: Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), { maxItems: 64 }),
    /** The device program and its version, e.g. `tether-host/0.1.0`. */
    agent: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type HelloBody = Omit<Static<typeof HelloBodySchema>, "tools"> & { tools: AnnouncedTool[] };

export const HelloReplySchema = Type.Object({
  protocol: Type.Number(),
  deviceId: Type.String(),
  name: Type.String(),
  /** The tether-host version this server offers for download (`/downloads`); newer than the device's means an update exists. */
  hostVersion: Type.Optional(Type.String()),
  /** The oldest tether-host this server supports (`MIN_HOST_VERSION`); an older device says so and shows as outdated. */
  minimumHostVersion: Type.Optional(Type.String()),
});
export type HelloReply = Static<typeof HelloReplySchema>;

/** Names of the events the server sends down the stream. */
export const StreamEvent = {
  /** First event on every stream: `ReadyEvent`. */
  ready: "ready",
  /** Run a tool: `CallEvent`. */
  call: "call",
  /** Give up on a call (the server stopped waiting): `CancelEvent`. */
  cancel: "cancel",
  /** The server is ending this stream: `CloseEvent`. The stream ends right after it. */
  close: "close",
} as const;

export const ReadyEventSchema = Type.Object({
  protocol: Type.Number(),
  deviceId: Type.String(),
  /** Interval of `: keep-alive` comments; a device hearing nothing for 3× this reconnects. */
  keepAliveMs: Type.Number(),
});
export type ReadyEvent = Static<typeof ReadyEventSchema>;

/** An approved plan: the device's fresh plan must reproduce it exactly before it applies. */
export const ApprovedPlanSchema = Type.Object({ diff: Type.String(), summary: Type.String() });

export const CallEventSchema = Type.Object({
  id: Type.String(),
  tool: Type.String(),
  input: Type.Unknown(),
  mode: ToolModeSchema,
  /** How long the server waits for the result; the device may abort after it. */
  timeoutMs: Type.Number(),
  /** For `apply`: the approved plan, which the device's fresh plan must reproduce exactly. */
  expectedPlan: Type.Optional(ApprovedPlanSchema),
  /** Blobs the input names by id (write_file's `blob`), resolved by the server: where and what to read. */
  blobs: Type.Optional(Type.Record(Type.String({ pattern: "^b_[A-Za-z0-9_-]{22}$" }), BlobReadSchema, { maxProperties: 4 })),
});
export type CallEvent = Static<typeof CallEventSchema>;

export const CancelEventSchema = Type.Object({ id: Type.String() });
export type CancelEvent = Static<typeof CancelEventSchema>;

/**
 * Why the server ended a stream:
 * - `replaced`: a newer stream of the same device took over (do not reconnect: another process has it);
 * - `revoked`: the device's credential was revoked (pair again);
 * - `shutdown`: the server is stopping (reconnect with backoff).
 */
export const CloseReasonSchema = Type.Union([Type.Literal("replaced"), Type.Literal("revoked"), Type.Literal("shutdown")]);
export type CloseReason = Static<typeof CloseReasonSchema>;

export const CloseEventSchema = Type.Object({ reason: CloseReasonSchema, message: Type.String() });
export type CloseEvent = Static<typeof CloseEventSchema>;

const CallId = Type.String({ minLength: 1, maxLength: 100 });

/** A tool's refusal or failure, as the device reports it (bounded further by `boundFailure` on both sides). */
export const CallFailureSchema = Type.Object(
  { code: Type.String({ minLength: 1, maxLength: 100 }), message: Type.String({ maxLength: 10_000 }) },
  { additionalProperties: false },
);

/**
 * What a device's error may be, agreed by both sides: a code of capitals, digits and `_` (every `ToolError` code),
 * and a message of at most `MAX_ERROR_MESSAGE_CHARS` characters. The device bounds its errors with `boundFailure`
 * before it posts them; the server bounds every error it receives the same way, since the wire still accepts the
 * 10,000 characters first devices may send (refusing them would lose the call's outcome, or a whole batch).
 */
export const MAX_ERROR_MESSAGE_CHARS = 500;
export const ERROR_CODE = /^[A-Z][A-Z0-9_]{0,63}$/;
/** The code an error gets when the device's own is not code-shaped. */
export const DEVICE_ERROR_CODE = "DEVICE_ERROR";

export function boundFailure(failure: { code: string; message: string }): { code: string; message: string } {
  const code = ERROR_CODE.test(failure.code) ? failure.code : DEVICE_ERROR_CODE;
  const { message } = failure;
  if (message.length <= MAX_ERROR_MESSAGE_CHARS) return { code, message };
  let end = MAX_ERROR_MESSAGE_CHARS - 1;
  if (/[\uD800-\uDBFF]/.test(message[end - 1]!)) end -= 1;
  return { code, message: `${message.slice(0, end)}…` };
}

/**
 * One call's outcome with its id, as a batch (`POST /api/host/results`) carries it. The result is the tool's JSON as the
 * tool returned it, never fenced: fencing happens where content meets a model (`assistantTools`, MCP).
 */
export const ResultBodySchema = Type.Union([
  Type.Object({ id: CallId, ok: Type.Literal(true), result: Type.Unknown() }, { additionalProperties: false }),
  Type.Object({ id: CallId, ok: Type.Literal(false), error: CallFailureSchema }, { additionalProperties: false }),
]);
export type ResultBody = Static<typeof ResultBodySchema>;

/** `POST /api/host/result/:callId`: the call id in the path… */
export const ResultParamsSchema = Type.Object({ callId: CallId }, { additionalProperties: false });
/** …and the outcome, without the id, in the body. */
export const CallOutcomeSchema = Type.Union([
  Type.Object({ ok: Type.Literal(true), result: Type.Unknown() }, { additionalProperties: false }),
  Type.Object({ ok: Type.Literal(false), error: CallFailureSchema }, { additionalProperties: false }),
]);

/**
 * `POST /api/host/results`: the outcomes of several calls in one request. The device sends one when
 * more than one small result is ready in the same turn of its event loop (many calls in flight), so
 * each call costs a fraction of a request instead of a whole one. A batch is at most this large in
 * all, the smallest of the per-class result limits, so no result in it needs a class-specific check.
 */
export const MAX_RESULT_BATCH_BYTES = 256 * 1024;
export const MAX_RESULT_BATCH_ITEMS = 64;
export const ResultBatchSchema = Type.Object(
  { results: Type.Array(ResultBodySchema, { minItems: 1, maxItems: MAX_RESULT_BATCH_ITEMS }) },
  { additionalProperties: false },
);
export type ResultBatch = Static<typeof ResultBatchSchema>;
/** The results the server did not take (the call was not awaited, was another device's, or already settled). */
export const ResultBatchReplySchema = Type.Object(
  { refused: Type.Array(Type.Object({ id: CallId, code: Type.String() }, { additionalProperties: false })) },
  { additionalProperties: false },
);
export type ResultBatchReply = Static<typeof ResultBatchReplySchema>;
