import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { unauthorized } from "../../http/errors.js";
import { jsonResponses } from "../../http/response-schemas.js";
import { toUiUser } from "../../plugins/session/session-plugin.js";

const MeJson = Type.Object({
  user: Type.Object({ id: Type.String(), name: Type.String(), email: Type.String(), isSiteAdmin: Type.Boolean() }),
  via: Type.Union([Type.Literal("cookie"), Type.Literal("token")]),
});

/** `GET /api/me`: who is calling, and through which credential. */
export const meRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  fastify.get("/api/me", { schema: { response: jsonResponses({ 200: MeJson }) } }, async (request) => {
    const session = await request.getSession();
    if (!session) throw unauthorized();
    return { user: toUiUser(session.user), via: session.session ? ("cookie" as const) : ("token" as const) };
  });
};
