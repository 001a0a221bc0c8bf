import type { FastifyPluginAsync } from "fastify";
import fp from "fastify-plugin";
import { listApiTokens } from "../../plugins/session/api-tokens.js";
import { signedInUser } from "../guard.js";

/** Initials for the account badge: "Ada Lovelace" → "AL". */
export function initialsOf(name: string): string {
  return (
    name
      .split(/\s+/)
      .filter(Boolean)
      .slice(0, 2)
      .map((word) => word[0]!.toUpperCase())
      .join("") || "?"
  );
}

/** `/home`: the signed-in landing page (inside the guarded context). */
const routes: FastifyPluginAsync = async (fastify) => {
  fastify.get("/home", async (request, reply) => {
    const user = signedInUser(request);
    const tokenCount = (await listApiTokens(fastify.tetherDb, user.id)).length;
    const userCount = user.isSiteAdmin
      ? Number((await fastify.tetherDb.selectFrom("user").select((eb) => eb.fn.countAll().as("count")).executeTakeFirstOrThrow()).count)
      : 0;
    return reply.render("home", { title: "Home", tokenCount, userCount, initials: initialsOf(user.name) });
  });
};

export const homePage = fp(routes, { name: "tether-home-page", fastify: "5.x", encapsulate: true, dependencies: ["tether-db", "tether-page-render"] });
