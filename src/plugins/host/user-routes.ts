import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { hostCaller as caller, hostPerson as person } from "./callers.js";
import { proposalPath } from "./proposals.js";
import { rethrowAsHttpError } from "./errors.js";
import {
  ApprovedJson,
  CallProposedJson,
  CallResultJson,
  DeviceJson,
  DeviceListJson,
  PairingCodeJson,
  ProposalJson,
  ProposalListJson,
  RejectedJson,
} from "./api-schemas.js";
import { connectionClosed } from "../../http/connection-signal.js";
import { jsonResponses, NoContent } from "../../http/response-schemas.js";
import { strictValidatorCompiler } from "../../http/strict-validator.js";

const Id = Type.String({ minLength: 1, maxLength: 100 });
const IdParams = Type.Object({ id: Id });

const CallBody = Type.Object(
  {
    deviceId: Id,
    tool: Type.String({ minLength: 1, maxLength: 128 }),
    input: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 600_000 })),
  },
  { additionalProperties: false },
);

/**
 * A page of pending proposals: `cursor` is the previous page's `nextCursor`. Query strings are strings
 * (no coercion): the page size is digits, clamped to 1–100.
 */
const ProposalPageQuery = Type.Object(
  { cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })), limit: Type.Optional(Type.String({ pattern: "^[0-9]{1,3}$" })) },
  { additionalProperties: false },
);

/** Only the id: the input applied is the one stored at propose time. */
const DecisionBody = Type.Object({ proposalId: Id }, { additionalProperties: false });

/** The owner's side of the connector, as JSON under `/api/host`. */
export const userRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  const service = fastify.tetherHost;
  // Unknown fields are refused, not dropped (see src/http/strict-validator.ts).
  fastify.setValidatorCompiler(strictValidatorCompiler);
  fastify.setErrorHandler(rethrowAsHttpError);
  const baseURL = String(fastify.tetherAuth.options.baseURL).replace(/\/$/, "");
  /** A proposal as the API shows it: with the address of its page. */
  const withURL = <P extends { id: string }>(proposal: P) => ({ ...proposal, url: `${baseURL}${proposalPath(proposal.id)}` });

  fastify.post("/api/host/pairing-codes", { schema: { response: jsonResponses({ 201: PairingCodeJson }) } }, async (request, reply) => {
    const { userId } = await person(request);
    const minted = await service.mintPairingCode(userId);
    return reply.code(201).send({ code: minted.code, expiresAt: minted.expiresAt });
  });

  // Devices and proposals are read alike: the caller's list, and one of them by id (404 when not theirs).
  // A token limited to chosen devices sees only those (and their proposals): `deviceIds` goes with every lookup.
  fastify.get("/api/host/devices", { schema: { response: jsonResponses({ 200: DeviceListJson }) } }, async (request) => {
    const { userId, deviceIds } = await caller(request);
    return { devices: await service.listDevices(userId, deviceIds) };
  });
  fastify.get("/api/host/devices/:id", { schema: { params: IdParams, response: jsonResponses({ 200: DeviceJson }) } }, async (request) => {
    const { userId, deviceIds } = await caller(request);
    return service.device(userId, request.params.id, deviceIds);
  });

  fastify.delete("/api/host/devices/:id", { schema: { params: IdParams, response: jsonResponses({ 204: NoContent }) } }, async (request, reply) => {
    const { userId } = await person(request);
    await service.revoke(userId, request.params.id);
    return reply.code(204).send();
  });

  fastify.post(
    "/api/host/calls",
    { schema: { body: CallBody, response: jsonResponses({ 200: CallResultJson, 202: CallProposedJson }) } },
    async (request, reply) => {
      const who = await caller(request);
      const { deviceId, tool, input, timeoutMs } = request.body;
      // A client that hangs up stops the wait, and the device is told to cancel.
      const outcome = await service.call(who, {
        deviceId,
        tool,
        input: input ?? {},
        signal: connectionClosed(request),
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      });
      if (outcome.kind === "result") return { tool: tool, class: outcome.tool.class, result: outcome.result };
      const { proposal } = outcome;
      const { url } = withURL(proposal);
      return reply.code(202).send({ proposalId: proposal.id, tool, diff: proposal.diff ?? "", summary: proposal.summary, expiresAt: proposal.expiresAt, url });
    },
  );

  // Pages without diffs: a diff (up to 1 MB) is read one proposal at a time, below.
  fastify.get("/api/host/proposals", { schema: { querystring: ProposalPageQuery, response: jsonResponses({ 200: ProposalListJson }) } }, async (request) => {
    const { cursor, limit } = request.query;
    const { userId, deviceIds } = await caller(request);
    const page = await service.pendingProposals(userId, { cursor, limit: limit === undefined ? undefined : Number(limit) }, deviceIds);
    return { ...page, proposals: page.proposals.map(withURL) };
  });
  fastify.get("/api/host/proposals/:id", { schema: { params: IdParams, response: jsonResponses({ 200: ProposalJson }) } }, async (request) => {
    const { userId, deviceIds } = await caller(request);
    return withURL(await service.proposal(userId, request.params.id, deviceIds));
  });

  fastify.post("/api/host/approve", { schema: { body: DecisionBody, response: jsonResponses({ 200: ApprovedJson }) } }, async (request) => {
    const who = await person(request);
    const { proposal, result } = await service.approve(who, request.body.proposalId);
    return { proposalId: proposal.id, status: proposal.status, result };
  });

  fastify.post("/api/host/reject", { schema: { body: DecisionBody, response: jsonResponses({ 200: RejectedJson }) } }, async (request) => {
    const who = await person(request);
    const proposal = await service.reject(who, request.body.proposalId);
    return { proposalId: proposal.id, status: proposal.status };
  });
};
