import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyRequest } from "fastify";
import { unauthorized } from "../../http/errors.js";
import type { ResolvedSession } from "../session/resolve-session.js";
import { HostError, toHttpError } from "./errors.js";
import type { Proposal } from "./proposals.js";
import type { Caller, DeviceView } from "./service.js";
import { hostValidatorCompiler } from "./validator.js";

/** The scope an API token needs to list devices and call tools. */
export const HOST_CALL_SCOPE = "host:call";

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

/** Who may ask: the owner's browser session, or an API token carrying `host:call`. */
async function caller(request: FastifyRequest): Promise<Caller> {
  const session = await request.getSession({ requiredScope: HOST_CALL_SCOPE });
  if (!session) throw unauthorized(`Sign in, or send an API token with the "${HOST_CALL_SCOPE}" scope`);
  return { userId: session.user.id, actor: session.session ? "session" : "token" };
}

/**
 * Pairing, revoking and deciding on proposals are a person's acts: they need the owner's browser
 * session. An agent holding a token can propose a change, never approve its own proposal.
 */
async function person(request: FastifyRequest): Promise<Caller> {
  const session: ResolvedSession | null = await request.getSession();
  if (!session) throw unauthorized();
  if (session.session === null) {
    throw new HostError("COOKIE_SESSION_REQUIRED", "This needs the owner's signed-in browser session, not an API token");
  }
  return { userId: session.user.id, actor: "session" };
}

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
    error: proposal.error,
  };
}

/** The owner's side of the connector, as JSON under `/api/host`. */
export const userRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  const service = fastify.host;
  // Unknown fields are refused, not dropped (see validator.ts).
  fastify.setValidatorCompiler(hostValidatorCompiler);
  fastify.setErrorHandler(async (error) => {
    throw toHttpError(error);
  });

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
    const outcome = await service.call(who, { deviceId, tool, input: input ?? {}, ...(timeoutMs !== undefined ? { timeoutMs } : {}) });
    if (outcome.kind === "result") return { tool: tool, class: outcome.tool.class, result: outcome.result };
    const { proposal } = outcome;
    return reply.code(202).send({ proposalId: proposal.id, tool, diff: proposal.diff, summary: proposal.summary, expiresAt: proposal.expiresAt });
  });

  fastify.get("/api/host/proposals", async (request) => {
    const { userId } = await caller(request);
    return { proposals: (await service.pendingProposals(userId)).map(proposalJson) };
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
