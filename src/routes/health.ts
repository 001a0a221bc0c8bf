import type { FastifyPluginAsync } from "fastify";
import { sql } from "kysely";

/** `GET /healthz`: 200 when the database answers, 503 otherwise. */
export const healthRoutes: FastifyPluginAsync = async (fastify) => {
  fastify.get("/healthz", async (request, reply) => {
    try {
      await sql`select 1`.execute(fastify.tetherDb);
      return { status: "ok" };
    } catch (error) {
      request.log.warn({ err: error }, "health check: database unreachable");
      return reply.code(503).send({ code: "DATABASE_UNAVAILABLE", message: "The database does not answer" });
    }
  });
};
