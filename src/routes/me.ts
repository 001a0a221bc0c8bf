import type { FastifyPluginAsync } from "fastify";
import { unauthorized } from "../http/errors.js";

/** `GET /api/me`: who is calling, and through which credential. */
export const meRoutes: FastifyPluginAsync = async (fastify) => {
  fastify.get("/api/me", async (request) => {
    const session = await request.getSession();
    if (!session) throw unauthorized();
    const { id, name, email, isSiteAdmin } = session.user;
    return { user: { id, name, email, isSiteAdmin: isSiteAdmin === true }, via: session.session ? "cookie" : "token" };
  });
};
