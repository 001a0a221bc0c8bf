import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { sql } from "kysely";
import { jsonResponses } from "../../http/response-schemas.js";

const Healthy = Type.Object({ status: Type.Literal("ok") });

/**
 * `GET /healthz`: 200 when the database answers and, with the host connector, calls can be routed;
 * 503 `DATABASE_UNAVAILABLE` or `DISPATCH_UNAVAILABLE` (Redis unreachable on a cluster) otherwise.
 */
export const healthRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get("/healthz", { schema: { response: jsonResponses({ 200: Healthy }) } }, async (request, reply) => {
    try {
      await sql`select 1`.execute(fastify.tetherDb);
    } catch (error) {
      request.log.warn({ err: error }, "health check: database unreachable");
      return reply.code(503).send({ code: "DATABASE_UNAVAILABLE", message: "The database does not answer" });
    }
    if (fastify.hasDecorator("tetherHost") && !fastify.tetherHost.dispatcher.available()) {
      return reply
        .code(503)
        .send({ code: "DISPATCH_UNAVAILABLE", message: "Calls to devices cannot be routed: the shared dispatcher (Redis) does not answer" });
    }
    return { status: "ok" as const };
  });
};
