import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import fp from "fastify-plugin";
import { badRequest, notFound, unauthorized } from "../../http/errors.js";
import { API_TOKEN_LIMITS } from "./api-tokens.js";
import { requireCookieSession } from "./session-plugin.js";
import { strictValidatorCompiler } from "../../http/strict-validator.js";

/** A scoped token may list and revoke its user's tokens only when it carries this scope. */
export const TOKENS_SCOPE = "tokens";

export const MINT_NEEDS_BROWSER = "API tokens can be created only from a signed-in browser session";

export const CreateTokenBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: API_TOKEN_LIMITS.nameMaxLength }),
    scopes: Type.Optional(Type.Array(Type.String({ pattern: API_TOKEN_LIMITS.scopePattern }), { maxItems: API_TOKEN_LIMITS.maxScopes })),
    expiresInDays: Type.Optional(Type.Integer({ minimum: 1, maximum: API_TOKEN_LIMITS.maxExpiresInDays })),
  },
  { additionalProperties: false },
);

const TokenIdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });

/**
 * The signed-in user's API tokens as JSON: create (the `sk_…` value is returned once), list, revoke.
 * Only a cookie session can mint a token: a token that could mint tokens could outlive its revocation.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  // Unknown fields are refused, not dropped: a misspelt `expiresInDays` must not mint a token that never expires.
  fastify.setValidatorCompiler(strictValidatorCompiler);

  fastify.post("/api/tokens", { schema: { body: CreateTokenBody } }, async (request, reply) => {
    const session = await request.getSession();
    if (!session) throw unauthorized();
    requireCookieSession(session, MINT_NEEDS_BROWSER);
    const name = request.body.name.trim();
    if (name === "") throw badRequest("INVALID_INPUT", 'body: "name" must not be blank');
    const created = await fastify.tetherApiTokens.create({ userId: session.user.id, ...request.body, name });
    return reply.code(201).send(created);
  });

  fastify.get("/api/tokens", async (request) => {
    const session = await request.getSession({ requiredScope: TOKENS_SCOPE });
    if (!session) throw unauthorized();
    return { tokens: await fastify.tetherApiTokens.list(session.user.id) };
  });

  fastify.delete("/api/tokens/:id", { schema: { params: TokenIdParams } }, async (request, reply) => {
    const session = await request.getSession({ requiredScope: TOKENS_SCOPE });
    if (!session) throw unauthorized();
    if (!(await fastify.tetherApiTokens.revoke(session.user.id, request.params.id))) throw notFound("No such token");
    return reply.code(204).send();
  });
};

export const apiTokenRoutes = fp(routes, {
  name: "tether-api-token-routes",
  fastify: "5.x",
  dependencies: ["tether-session"],
  encapsulate: true,
});
