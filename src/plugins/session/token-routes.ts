import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import fp from "fastify-plugin";
import { badRequest, notFound, unauthorized } from "../../http/errors.js";
import { API_TOKEN_LIMITS } from "./api-tokens.js";
import { SCOPES } from "./scopes.js";
import { requireCookieSession } from "./session-plugin.js";
import { DateTime, jsonResponses, NoContent, Nullable } from "../../http/response-schemas.js";
import { strictValidatorCompiler } from "../../http/strict-validator.js";

export const MINT_NEEDS_BROWSER = "API tokens can be created only from a signed-in browser session";

const GrantsJson = Type.Record(Type.String({ pattern: "^[a-z]{1,32}$" }), Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 }), {
  maxProperties: 8,
  additionalProperties: false,
});

export const CreateTokenBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: API_TOKEN_LIMITS.nameMaxLength }),
    scopes: Type.Optional(Type.Array(Type.String({ pattern: API_TOKEN_LIMITS.scopePattern }), { maxItems: API_TOKEN_LIMITS.maxScopes })),
    expiresInDays: Type.Optional(Type.Integer({ minimum: 1, maximum: API_TOKEN_LIMITS.maxExpiresInDays })),
    /** Limits besides scopes, by kind (e.g. `{"devices": ["<device id>"]}`); each kind is checked by the plugin that registered it. */
    grants: Type.Optional(GrantsJson),
  },
  { additionalProperties: false },
);

const TokenIdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });

/** A token as a list shows it: never the secret (only its first characters, to tell tokens apart). */
const TokenSummaryJson = Type.Object({
  id: Type.String(),
  name: Type.String(),
  prefix: Type.String(),
  scopes: Type.Array(Type.String()),
  createdAt: DateTime,
  lastUsedAt: Nullable(DateTime),
  expiresAt: Nullable(DateTime),
  /** Present only when the token is limited beyond its scopes (e.g. to chosen devices). */
  grants: Type.Optional(Type.Record(Type.String(), Type.Array(Type.String()))),
});
/** The one response that carries the `sk_…` value: the token just created. */
const CreatedTokenJson = Type.Object({ ...TokenSummaryJson.properties, token: Type.String() });
const TokenListJson = Type.Object({ tokens: Type.Array(TokenSummaryJson) });

/**
 * The signed-in user's API tokens as JSON: create (the `sk_…` value is returned once), list, revoke.
 * Only a cookie session can mint a token: a token that could mint tokens could outlive its revocation.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  // Unknown fields are refused, not dropped: a misspelt `expiresInDays` must not mint a token that never expires.
  fastify.setValidatorCompiler(strictValidatorCompiler);

  fastify.post("/api/tokens", { schema: { body: CreateTokenBody, response: jsonResponses({ 201: CreatedTokenJson }) } }, async (request, reply) => {
    const session = await request.getSession();
    if (!session) throw unauthorized();
    requireCookieSession(session, MINT_NEEDS_BROWSER);
    const name = request.body.name.trim();
    if (name === "") throw badRequest("INVALID_INPUT", 'body: "name" must not be blank');
    const created = await fastify.tetherApiTokens.create({ userId: session.user.id, ...request.body, name });
    return reply.code(201).send(created);
  });

  fastify.get("/api/tokens", { schema: { response: jsonResponses({ 200: TokenListJson }) } }, async (request) => {
    const session = await request.getSession({ requiredScope: SCOPES.tokens });
    if (!session) throw unauthorized();
    return { tokens: await fastify.tetherApiTokens.list(session.user.id) };
  });

  fastify.delete("/api/tokens/:id", { schema: { params: TokenIdParams, response: jsonResponses({ 204: NoContent }) } }, async (request, reply) => {
    const session = await request.getSession({ requiredScope: SCOPES.tokens });
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
