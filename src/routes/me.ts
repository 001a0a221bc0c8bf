import type { FastifyPluginAsync } from "fastify";
import { unauthorized } from "../http/errors.js";
import { toUiUser } from "../plugins/session/session-plugin.js";

/** `GET /api/me`: who is calling, and through which credential. */
export const meRoutes: FastifyPluginAsync = async (fastify) => {
  fastify.get("/api/me", async (request) => {
    const session = await request.getSession();
    if (!session) throw unauthorized();
    return { user: toUiUser(session.user), via: session.session ? "cookie" : "token" };
  });
};
