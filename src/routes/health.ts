import type { FastifyPluginAsync } from "fastify";
import { sql } from "kysely";

/**
 * `GET /healthz`: 200 when the database answers and, with the host connector, calls can be routed;
 * 503 `DATABASE_UNAVAILABLE` or `DISPATCH_UNAVAILABLE` (Redis unreachable on a cluster) otherwise.
 */
export const healthRoutes: FastifyPluginAsync = async (fastify) => {
  fastify.get("/healthz", async (request, reply) => {
    try {
      await sql`select 1`.execute(fastify.tetherDb);
    } catch (error) {
      request.log.warn({ err: error }, "health check: database unreachable");
      return reply.code(503).send({ code: "DATABASE_UNAVAILABLE", message: "The database does not answer" });
    }
    if (fastify.hasDecorator("tetherHost") && !fastify.tetherHost.dispatcher.available()) {
      return reply.code(503).send({ code: "DISPATCH_UNAVAILABLE", message: "Calls to devices cannot be routed: the shared dispatcher (Redis) does not answer" });
    }
    return { status: "ok" };
  });
};
