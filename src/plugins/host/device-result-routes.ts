import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { describeError } from "../../http/error-handler.js";
import { badRequest, HttpError } from "../../http/errors.js";
import { jsonResponses, NoContent } from "../../http/response-schemas.js";
import {
  CallOutcomeSchema,
  MAX_RESULT_BATCH_BYTES,
  ResultBatchReplySchema,
  ResultBatchSchema,
  ResultParamsSchema,
  type ResultBatchReply,
} from "../../protocol/index.js";
import { HostError, toHttpError } from "./errors.js";
import { MAX_RESULT_BODY, nestingExceeds, RESULT_BODY_LIMITS } from "./result-body.js";

/** Why a result is not taken: refused per result in a batch, where a single post answers 4xx. */
const SETTLE_REFUSALS = new Set(["UNKNOWN_CALL", "WRONG_DEVICE", "RESULT_ALREADY_RECEIVED"]);

/**
 * Where a device posts its results, one per request or several in a batch; registered by `deviceRoutes`
 * inside the device-token context, so `request.tetherDevice` is set. A result is parsed only after its
 * size and depth are known to be within its call's limits.
 */
export const resultRoutes: FastifyPluginAsyncTypebox = async (results) => {
  const service = results.tetherHost;
  results.setErrorHandler(endRefusedCall(results, (request) => (request.params as { callId?: unknown } | undefined)?.callId));
  // Parsed here only after the depth scan: a body of nested empty arrays costs one pass, not a recursion.
  const parse = results.getDefaultJsonParser("error", "error");
  results.removeContentTypeParser("application/json");
  results.addContentTypeParser("application/json", { parseAs: "buffer", bodyLimit: MAX_RESULT_BODY }, (request, body, done) => {
    if (nestingExceeds(body as Buffer)) return done(badRequest("RESULT_TOO_DEEP", "The result is nested too deeply"), undefined);
    void parse(request, (body as Buffer).toString("utf8"), done);
  });

  results.post(
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
  results.post(
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
};

/**
 * A refused result (too large, too deep, NUL bytes, not the schema) still ends its call, when the call
 * id is known: the caller hears why at once instead of waiting out the call's timeout.
 */
function endRefusedCall(fastify: FastifyInstance, callIdOf: (request: FastifyRequest) => unknown) {
  return async (error: Error, request: FastifyRequest) => {
    const refusal = toHttpError(error) as Error;
    const callId = callIdOf(request);
    if (request.tetherDevice && typeof callId === "string") await fastify.tetherHost.refuseResult(request.tetherDevice, callId, describeError(refusal));
    throw refusal;
  };
}
