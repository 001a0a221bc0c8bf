import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { hostCaller as caller, hostPerson as person } from "./callers.js";
import { rethrowAsHttpError } from "./errors.js";
import type { Proposal } from "./proposals.js";
import type { DeviceView } from "./service.js";
import { strictValidatorCompiler } from "../../http/strict-validator.js";

export { HOST_CALL_SCOPE } from "./callers.js";

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

/** Only the id: the input applied is the one stored at propose time. */
const DecisionBody = Type.Object({ proposalId: Id }, { additionalProperties: false });

export function deviceJson(device: DeviceView) {
  return {
    id: device.id,
    name: device.name,
    platform: device.platform,
    online: device.online,
    lastSeenAt: device.lastSeenAt,
    createdAt: device.createdAt,
    agent: device.agent,
    tools: device.tools,
    roots: device.roots,
  };
}

export function proposalJson(proposal: Proposal) {
  return {
    id: proposal.id,
    deviceId: proposal.deviceId,
    tool: proposal.tool,
    input: proposal.input,
    diff: proposal.diff,
    summary: proposal.summary,
    status: proposal.status,
    createdAt: proposal.createdAt,
    expiresAt: proposal.expiresAt,
    decidedAt: proposal.decidedAt,
    finishedAt: proposal.finishedAt,
    result: proposal.result,
    error: proposal.error,
  };
}

/** The owner's side of the connector, as JSON under `/api/host`. */
export const userRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  const service = fastify.tetherHost;
  // Unknown fields are refused, not dropped (see src/http/strict-validator.ts).
  fastify.setValidatorCompiler(strictValidatorCompiler);
  fastify.setErrorHandler(rethrowAsHttpError);

  fastify.post("/api/host/pairing-codes", async (request, reply) => {
    const { userId } = await person(request);
    const minted = await service.mintPairingCode(userId);
    return reply.code(201).send({ code: minted.code, expiresAt: minted.expiresAt });
  });

  fastify.get("/api/host/devices", async (request) => {
    const { userId } = await caller(request);
    return { devices: (await service.listDevices(userId)).map(deviceJson) };
  });

  fastify.get("/api/host/devices/:id", { schema: { params: IdParams } }, async (request) => {
    const { userId } = await caller(request);
    return deviceJson(await service.device(userId, request.params.id));
  });

  fastify.delete("/api/host/devices/:id", { schema: { params: IdParams } }, async (request, reply) => {
    const { userId } = await person(request);
    await service.revoke(userId, request.params.id);
    return reply.code(204).send();
  });

  fastify.post("/api/host/calls", { schema: { body: CallBody } }, async (request, reply) => {
    const who = await caller(request);
    const { deviceId, tool, input, timeoutMs } = request.body;
    // A client that hangs up stops the wait, and the device is told to cancel.
    const gone = new AbortController();
    reply.raw.once("close", () => {
      if (!reply.raw.writableFinished) gone.abort();
    });
    const outcome = await service.call(who, { deviceId, tool, input: input ?? {}, signal: gone.signal, ...(timeoutMs !== undefined ? { timeoutMs } : {}) });
    if (outcome.kind === "result") return { tool: tool, class: outcome.tool.class, result: outcome.result };
    const { proposal } = outcome;
    return reply.code(202).send({ proposalId: proposal.id, tool, diff: proposal.diff, summary: proposal.summary, expiresAt: proposal.expiresAt });
  });

  fastify.get("/api/host/proposals", async (request) => {
    const { userId } = await caller(request);
    return { proposals: (await service.pendingProposals(userId)).map(proposalJson) };
  });

  fastify.get("/api/host/proposals/:id", { schema: { params: IdParams } }, async (request) => {
    const { userId } = await caller(request);
    return proposalJson(await service.proposal(userId, request.params.id));
  });

  fastify.post("/api/host/approve", { schema: { body: DecisionBody } }, async (request) => {
    const who = await person(request);
    const { proposal, result } = await service.approve(who, request.body.proposalId);
    return { proposalId: proposal.id, status: proposal.status, result };
  });

  fastify.post("/api/host/reject", { schema: { body: DecisionBody } }, async (request) => {
    const who = await person(request);
    const proposal = await service.reject(who, request.body.proposalId);
    return { proposalId: proposal.id, status: proposal.status };
  });
};
