import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
// Only package entries: this plugin is what an embedding team would write against tether/host.
import { HttpError, notFound, redirectTo } from "../../http/index.js";
import { hostPerson } from "../../plugins/host/callers.js";
import { HostError, hostRefusal } from "../../plugins/host/errors.js";
import type * as proposals from "../../plugins/host/proposals.js";
import { signedInUser } from "../guard.js";
import { wantsFragment } from "../render.js";
import { decidedView, outcomeSentence, proposalHref, proposalView } from "../proposal-view.js";

/**
 * A proposal's own page, `/devices/proposals/<id>` (what the MCP result and the API link to): its
 * device, path, proposer, diff and status, with Approve and Reject while it waits; and the decisions
 * themselves, from this page or from the list on /devices. Owner only: another user's id is 404.
 * Registered by the /devices pages (devices-dashboard.ts), inside the guarded context.
 */

const Id = Type.String({ minLength: 1, maxLength: 100 });
const Params = Type.Object({ id: Id });
const PageQuery = Type.Object({ notice: Type.Optional(Type.String({ maxLength: 20 })) });

type Proposal = proposals.Proposal;

export const proposalPages: FastifyPluginAsync = async (instance) => {
  const fastify = instance.withTypeProvider<TypeBoxTypeProvider>();
  const service = fastify.tetherHost;

  const owned = async (owner: string, id: string): Promise<Proposal> =>
    service.proposal(owner, id).catch((error: unknown) => {
      if (error instanceof HostError) throw notFound("You have no proposal with this id. It may belong to another account, or the link is wrong.");
      throw error;
    });

  const deviceName = async (owner: string, deviceId: string) => {
    const found = (await service.listDevices(owner)).find((device) => device.id === deviceId);
    return { name: found?.name ?? "a revoked device", revoked: !found };
  };

  /** The whole page, with a notice when a decision was just made (or refused). */
  const show = async (reply: FastifyReply, owner: string, id: string, notice?: { text: string; kind: "success" | "error" }) => {
    const proposal = await owned(owner, id);
    const device = await deviceName(owner, proposal.deviceId);
    const input = (typeof proposal.input === "object" && proposal.input !== null ? proposal.input : {}) as Record<string, unknown>;
    return reply.tetherRender("devices/proposal", {
      title: `Proposed change: ${proposal.tool}`,
      proposal: proposalView(proposal, proposal.diff ?? "", device.name),
      decided: decidedView(proposal, device.name),
      device,
      path: typeof input.path === "string" ? input.path : undefined,
      purged: proposal.diff === null,
      notice,
    });
  };

  fastify.get("/devices/proposals/:id", { schema: { params: Params, querystring: PageQuery } }, async (request, reply) => {
    const owner = signedInUser(request).id;
    const { notice } = request.query;
    if (notice !== "applied" && notice !== "rejected") return show(reply, owner, request.params.id);
    const proposal = await owned(owner, request.params.id);
    const device = await deviceName(owner, proposal.deviceId);
    return show(reply, owner, proposal.id, { text: outcomeSentence(proposal, device.name), kind: proposal.status === "failed" ? "error" : "success" });
  });

  // The whole stored diff, for a proposal too large to show on the page: a download, never rendered.
  fastify.get("/devices/proposals/:id/diff", { schema: { params: Params } }, async (request, reply) => {
    const proposal = await owned(signedInUser(request).id, request.params.id);
    if (proposal.diff === null)
      throw new HttpError(410, "PROPOSAL_PURGED", "This proposal's diff was deleted after the retention period; its record stays in your activity.");
    return reply.type("text/plain; charset=utf-8").header("content-disposition", `attachment; filename="proposal-${proposal.id}.diff"`).send(proposal.diff);
  });

  /**
   * Approve or Reject. Without JavaScript the browser lands on the proposal's page, which says what
   * happened; with htmx the answer is that sentence, swapped into the notice area of the list.
   */
  const decide = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply, decision: "approve" | "reject") => {
    const caller = await hostPerson(request);
    const id = request.params.id;
    let outcome: { kind: "success" | "error"; text: string };
    try {
      const proposal = decision === "approve" ? (await service.approve(caller, id)).proposal : await service.reject(caller, id);
      const full = await owned(caller.userId, proposal.id);
      outcome = { kind: "success", text: outcomeSentence(full, (await deviceName(caller.userId, full.deviceId)).name) };
    } catch (error) {
      const refusal = hostRefusal(error);
      // Not this user's, or no such id: the page says so (404), with or without JavaScript.
      if (refusal.code === "PROPOSAL_NOT_FOUND") throw notFound("You have no proposal with this id. It may belong to another account, or the link is wrong.");
      outcome = { kind: "error", text: `${decision === "approve" ? "Not applied" : "Not rejected"}: ${refusal.message} (${refusal.code})` };
      reply.code(refusal.statusCode);
    }
    if (!wantsFragment(request)) {
      if (outcome.kind === "success") return redirectTo(request, reply, `${proposalHref(id)}?notice=${decision === "approve" ? "applied" : "rejected"}`);
      return show(reply, caller.userId, id, outcome);
    }
    return reply
      .header("hx-trigger", "proposals-changed")
      .tetherRender("devices/notice", { notice: outcome.text, kind: outcome.kind, href: proposalHref(id), linkText: "See the proposal" });
  };
  fastify.post("/devices/proposals/:id/approve", { schema: { params: Params } }, async (request, reply) => decide(request, reply, "approve"));
  fastify.post("/devices/proposals/:id/reject", { schema: { params: Params } }, async (request, reply) => decide(request, reply, "reject"));
};
