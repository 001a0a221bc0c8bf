import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyRequest } from "fastify";
import { bearerToken } from "../../http/bearer.js";
import { describeError } from "../../http/error-handler.js";
import { badRequest, HttpError } from "../../http/errors.js";
import type { DeviceIdentity } from "./devices.js";
import { HostError, rethrowAsHttpError, toHttpError } from "./errors.js";
import {
  duplicateToolName,
  EnrollBodySchema,
  EnrollReplySchema,
  HelloBodySchema,
  HelloReplySchema,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  CallOutcomeSchema,
  MAX_RESULT_BATCH_BYTES,
  ResultBatchReplySchema,
  ResultBatchSchema,
  ResultParamsSchema,
  StreamEvent,
  UpdateReportSchema,
  type HelloReply,
  type ReadyEvent,
  type ResultBatchReply,
} from "../../protocol/index.js";
import type { RateLimiter } from "./rate-limit.js";
import { recordUpdateReport } from "./device-updates.js";
import { MAX_RESULT_BODY, nestingExceeds, RESULT_BODY_LIMITS } from "./result-body.js";
import { openSseStream } from "./sse-channel.js";
import { jsonResponses, NoContent } from "../../http/response-schemas.js";
import { strictValidatorCompiler } from "../../http/strict-validator.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The device a device-token request comes from; set by the host device routes' auth hook. */
    tetherDevice: DeviceIdentity | null;
  }
}

export interface DeviceRoutesOptions {
  enrollLimiter: RateLimiter;
  keepAliveMs: number;
  /** The tether-host version on offer, told to each device at hello. */
  offeredHostVersion: () => Promise<string>;
  /** The oldest tether-host the server supports, told to each device at hello (`MIN_HOST_VERSION`). */
  minimumHostVersion?: string;
}


/** Why a result is not taken: refused per result in a batch, where a single post answers 4xx. */
const SETTLE_REFUSALS = new Set(["UNKNOWN_CALL", "WRONG_DEVICE", "RESULT_ALREADY_RECEIVED"]);

/** Every device-facing request names the protocol version it speaks; the one check for it. */
function checkProtocol(request: FastifyRequest): void {
  const spoken = request.headers[PROTOCOL_HEADER];
  if (spoken === String(PROTOCOL_VERSION)) return;
  const said = typeof spoken === "string" && spoken !== "" ? `version ${spoken}` : "no version (send the Tether-Protocol header)";
  throw new HostError(
    "PROTOCOL_VERSION_UNSUPPORTED",
    `This server speaks host protocol version ${PROTOCOL_VERSION}; the device speaks ${said}. Update tether-host or the server so they match.`,
  );
}

/**
 * The device side of the connector: enrollment (pairing code → token), and with the device token:
 * hello, the event stream and results. Device requests carry no cookie and no Origin, so the origin
 * guard lets them through; the token is their only credential.
 */
export const deviceRoutes: FastifyPluginAsyncTypebox<DeviceRoutesOptions> = async (fastify, options) => {
  const service = fastify.tetherHost;
  // Unknown fields are refused, not dropped (see src/http/strict-validator.ts).
  fastify.setValidatorCompiler(strictValidatorCompiler);
  fastify.setErrorHandler(rethrowAsHttpError);

  fastify.post(
    "/api/host/enroll",
    {
      schema: { body: EnrollBodySchema, response: jsonResponses({ 201: EnrollReplySchema }) },
      // Counted before the body is even parsed, so malformed attempts count too; refunded on success.
      onRequest: async (request, reply) => {
        checkProtocol(request);
        const retryAfter = await options.enrollLimiter.hit(request.ip).catch(() => {
          throw new HostError("RATE_LIMIT_UNAVAILABLE", "Enrollment is unavailable for a moment (the shared rate limit cannot be checked); try again shortly");
        });
        if (retryAfter > 0) {
          reply.header("retry-after", String(retryAfter));
          throw new HostError("RATE_LIMITED", `Too many enrollment attempts from this address; try again in ${retryAfter} s`);
        }
      },
    },
    async (request, reply) => {
      const { code, name, platform } = request.body;
      const enrolled = await service.enroll({ code, name: name.trim() || "device", platform: platform.trim() || "unknown" });
      // Only failed attempts count against the address: a person pairing several machines is fine.
      // A refund that fails only leaves one extra count in the window.
      await options.enrollLimiter.refund(request.ip).catch((error: unknown) => request.log.warn({ err: error }, "enroll rate limit refund failed"));
      return reply.code(201).send(enrolled);
    },
  );

  // The routes below authenticate with the device token.
  await fastify.register(async (instance) => {
    const authenticated = instance.withTypeProvider<TypeBoxTypeProvider>();
    authenticated.decorateRequest("tetherDevice", null);
    authenticated.addHook("onRequest", async (request) => {
      checkProtocol(request);
      const token = bearerToken(request.headers.authorization);
      if (token === undefined) throw new HostError("DEVICE_TOKEN_INVALID", "Send the device token as Authorization: Bearer dt_…");
      const verdict = await service.verifyDeviceToken(token);
      if (!verdict.ok) {
        throw verdict.reason === "revoked"
          ? new HostError("DEVICE_REVOKED", "This device's credential was revoked; pair the device again")
          : new HostError("DEVICE_TOKEN_INVALID", "This device token is not valid; pair the device again");
      }
      request.tetherDevice = verdict.device;
    });

    authenticated.post("/api/host/hello", { schema: { body: HelloBodySchema, response: jsonResponses({ 200: HelloReplySchema }) } }, async (request) => {
      const device = request.tetherDevice!;
      const twice = duplicateToolName(request.body.tools);
      if (twice !== undefined) throw badRequest("INVALID_INPUT", `body: tool "${twice}" is announced twice`);
      await service.hello(device, request.body);
      const reply: HelloReply = {
        protocol: PROTOCOL_VERSION,
        deviceId: device.id,
        name: device.name,
        hostVersion: await options.offeredHostVersion(),
        ...(options.minimumHostVersion ? { minimumHostVersion: options.minimumHostVersion } : {}),
      };
      return reply;
    });

    // How an update went (src/protocol/updates.ts): kept on the device row, shown to its owner on /devices.
    authenticated.post("/api/host/update-report", { schema: { body: UpdateReportSchema, response: jsonResponses({ 204: NoContent }) } }, async (request, reply) => {
      const device = request.tetherDevice!;
      await recordUpdateReport(fastify.tetherDb, device.id, request.body);
      request.log.info({ device: device.id, update: { ok: request.body.ok, from: request.body.from, to: request.body.to, code: request.body.code } }, "device update report");
      return reply.code(204).send();
    });

    authenticated.get("/api/host/stream", async (request, reply) => {
      const device = request.tetherDevice!;
      // Counted against the owner's and this device token's stream caps until the stream ends.
      const lease = await fastify.tetherStreams.admit(reply, { kind: "device", userId: device.userId, credential: `device:${device.id}` });
      let opened = false;
      try {
        const connection = await service.attachStream(device, () => {
          opened = true;
          reply.hijack();
          const stream = openSseStream(reply.raw, options.keepAliveMs);
          const ready: ReadyEvent = { protocol: PROTOCOL_VERSION, deviceId: device.id, keepAliveMs: options.keepAliveMs };
          stream.send(StreamEvent.ready, ready);
          void stream.ended.then(lease.release);
          stream.ended.then(() => service.detachStream(connection)).catch((error: unknown) => request.log.warn({ err: error }, "stream detach failed"));
          return stream;
        });
      } catch (error) {
        if (!opened) lease.release();
        throw error;
      }
    });

    /**
     * A refused result (too large, too deep, NUL bytes, not the schema) still ends its call, when the call
     * id is known: the caller hears why at once instead of waiting out the call's timeout.
     */
    const endRefusedCall = (callIdOf: (request: FastifyRequest) => unknown) => async (error: Error, request: FastifyRequest) => {
      const refusal = toHttpError(error) as Error;
      const callId = callIdOf(request);
      if (request.tetherDevice && typeof callId === "string") await service.refuseResult(request.tetherDevice, callId, describeError(refusal));
      throw refusal;
    };

    await authenticated.register(async (results) => {
      results.setErrorHandler(endRefusedCall((request) => (request.params as { callId?: unknown } | undefined)?.callId));
      // Parsed here only after the depth scan: a body of nested empty arrays costs one pass, not a recursion.
      const parse = results.getDefaultJsonParser("error", "error");
      results.removeContentTypeParser("application/json");
      results.addContentTypeParser("application/json", { parseAs: "buffer", bodyLimit: MAX_RESULT_BODY }, (request, body, done) => {
        if (nestingExceeds(body as Buffer)) return done(badRequest("RESULT_TOO_DEEP", "The result is nested too deeply"), undefined);
        void parse(request, (body as Buffer).toString("utf8"), done);
      });
      results.withTypeProvider<TypeBoxTypeProvider>().post(
        "/api/host/result/:callId",
        {
          schema: { params: ResultParamsSchema, body: CallOutcomeSchema, response: jsonResponses({ 204: NoContent }) },
          bodyLimit: MAX_RESULT_BODY,
          // Before a byte of the body is read: is this call awaited from this device, and how large may its result be?
          preParsing: async (request, _reply, payload) => {
            const { callId } = request.params;
            const toolClass = await service.expectResult(request.tetherDevice!, callId);
            const length = Number(request.headers["content-length"]);
            if (!Number.isSafeInteger(length)) throw new HttpError(411, "LENGTH_REQUIRED", "Send the result with a Content-Length");
            const limit = RESULT_BODY_LIMITS[toolClass];
            if (length > limit) throw new HttpError(413, "RESULT_TOO_LARGE", `A ${toolClass} tool's result may be at most ${limit} bytes`);
            return payload;
          },
        },
        async (request, reply) => {
          await service.settle(request.tetherDevice!, { id: request.params.callId, ...request.body });
          return reply.code(204).send();
        },
      );

      // Several small results in one request (see ResultBatchSchema): each is settled as if posted alone;
      // the ones not awaited from this device are listed, not fatal. Anything else (the shared dispatcher
      // unreachable) fails the request, and the device posts the batch again.
      results.withTypeProvider<TypeBoxTypeProvider>().post(
        "/api/host/results",
        { schema: { body: ResultBatchSchema, response: jsonResponses({ 200: ResultBatchReplySchema }) }, bodyLimit: MAX_RESULT_BATCH_BYTES },
        async (request): Promise<ResultBatchReply> => {
          const device = request.tetherDevice!;
          const refused: ResultBatchReply["refused"] = [];
          await Promise.all(
            request.body.results.map((result) =>
              service.settle(device, result).catch((error: unknown) => {
                if (!(error instanceof HostError) || !SETTLE_REFUSALS.has(error.code)) throw error;
                refused.push({ id: result.id, code: error.code });
              }),
            ),
          );
          return { refused };
        },
      );
    });
  });
};
