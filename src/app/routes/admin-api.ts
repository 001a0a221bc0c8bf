import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { badRequest, notFound } from "../../http/errors.js";
import { DateTime, Done, jsonResponses, NoContent, Nullable } from "../../http/response-schemas.js";
import { strictValidatorCompiler } from "../../http/strict-validator.js";
import { userAdmin } from "../../plugins/auth/user-admin.js";
import { SCOPES } from "../../plugins/session/scopes.js";

const UserParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });
const SiteAdminBody = Type.Object({ value: Type.Boolean() }, { additionalProperties: false });
const UserListJson = Type.Object({
  users: Type.Array(
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      email: Type.String(),
      isSiteAdmin: Type.Boolean(),
      deactivatedAt: Nullable(DateTime),
      createdAt: DateTime,
    }),
  ),
});
const done = jsonResponses({ 200: Done });

/**
 * Site-admin JSON API. Everything here sits in one encapsulated context whose hook demands a site
 * admin (a token needs the `admin` scope), so a route added here cannot forget the check.
 */
export const adminApiRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  const users = userAdmin(fastify.tetherAuth, fastify.tetherDb);
  // Unknown fields are refused, not dropped (see strict-validator.ts).
  fastify.setValidatorCompiler(strictValidatorCompiler);

  // Before validation: a caller who may not use this API learns nothing about its input.
  fastify.addHook("preValidation", async (request) => {
    await request.requireSiteAdmin({ requiredScope: SCOPES.admin });
  });

  const existing = async (id: string) => {
    if (!(await users.exists(id))) throw notFound("No such user");
    return id;
  };

  fastify.get("/users", { schema: { response: jsonResponses({ 200: UserListJson }) } }, async () => ({ users: await users.list() }));

  fastify.post("/users/:id/deactivate", { schema: { params: UserParams, response: done } }, async (request) => {
    const session = await request.requireSiteAdmin({ requiredScope: SCOPES.admin });
    const id = await existing(request.params.id);
    if (id === session.user.id) throw badRequest("CANNOT_DEACTIVATE_SELF", "You cannot deactivate your own account");
    await users.deactivate(id);
    return { ok: true };
  });

  fastify.post("/users/:id/reactivate", { schema: { params: UserParams, response: done } }, async (request) => {
    await users.reactivate(await existing(request.params.id));
    return { ok: true };
  });

  fastify.post("/users/:id/site-admin", { schema: { params: UserParams, body: SiteAdminBody, response: done } }, async (request) => {
    const session = await request.requireSiteAdmin({ requiredScope: SCOPES.admin });
    const id = await existing(request.params.id);
    if (id === session.user.id && !request.body.value) {
      throw badRequest("CANNOT_DEMOTE_SELF", "You cannot remove your own site-admin role");
    }
    await users.setSiteAdmin(id, request.body.value);
    return { ok: true };
  });

  fastify.delete("/users/:id", { schema: { params: UserParams, response: jsonResponses({ 204: NoContent }) } }, async (request, reply) => {
    const session = await request.requireSiteAdmin({ requiredScope: SCOPES.admin });
    const id = await existing(request.params.id);
    if (id === session.user.id) throw badRequest("CANNOT_DELETE_SELF", "You cannot delete your own account");
    await users.remove(id);
    return reply.code(204).send();
  });
};
