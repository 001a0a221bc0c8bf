import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { hostCaller } from "../../plugins/host/callers.js";
import { hostRefusal } from "../../plugins/host/errors.js";
import { wantsFragment } from "../render.js";
import { proposalView } from "../proposal-view.js";
import { formAction, readForm } from "../schema-form.js";
import { DEVICES_PATH, devicesPage, setResult, toolPanel } from "./devices-view.js";

/**
 * `/devices/<id>/tools/<tool>`: any tool of a device, run through a form generated from its input schema.
 * A read or action tool's result shows in the tool panel; a mutate tool's change becomes a proposal shown
 * there with its diff. Registered by the /devices pages (devices-dashboard.ts), inside the guarded context.
 */

const Id = Type.String({ minLength: 1, maxLength: 100 });
const ToolParams = Type.Object({ id: Id, tool: Type.String({ minLength: 1, maxLength: 128 }) });
/** Form fields are strings (or repeated strings); the tool's schema says what they mean. */
const ToolForm = Type.Record(Type.String({ maxLength: 200 }), Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 100 })]));

export const deviceToolPages: FastifyPluginAsyncTypebox = async (fastify) => {
  const service = fastify.tetherHost;

  // A read tool's link (a folder in a listing, "show more" of a file) runs it: `?arg.path=…` fills the form.
  fastify.get(`${DEVICES_PATH}/:id/tools/:tool`, { schema: { params: ToolParams, querystring: ToolForm } }, async (request, reply) => {
    const query = request.query;
    const linked = Object.keys(query).some((key) => key.startsWith("arg."));
    const caller = await hostCaller(request);
    const panel = await toolPanel(fastify, caller.userId, request.params.id, request.params.tool, linked ? query : undefined);
    if (linked && panel.tool.class === "read") {
      const read = readForm(panel.tool.inputSchema, query);
      if (read.ok) {
        try {
          const outcome = await service.call(caller, { deviceId: panel.device.id, tool: panel.tool.name, input: read.input });
          if (outcome.kind === "result") setResult(panel, outcome.result, read.input);
        } catch (error) {
          const refusal = hostRefusal(error);
          panel.error = `${refusal.message} (${refusal.code})`;
          reply.code(refusal.statusCode);
        }
      } else {
        panel.error = read.error;
        panel.errorField = read.field;
        reply.code(400);
      }
    }
    if (wantsFragment(request)) return reply.tetherRender("devices/tool", { tool: panel });
    return devicesPage(request, reply, { tool: panel });
  });

  fastify.post(`${DEVICES_PATH}/:id/tools/:tool`, { schema: { params: ToolParams, body: ToolForm } }, async (request, reply) => {
    const caller = await hostCaller(request);
    // "Add another …" or "Remove": the same form again, values kept, with one item more or less; nothing runs.
    const action = formAction(request.body);
    const panel = await toolPanel(fastify, caller.userId, request.params.id, request.params.tool, request.body, action);
    const show = (status: number) => {
      reply.code(status);
      return wantsFragment(request) ? reply.tetherRender("devices/tool", { tool: panel }) : devicesPage(request, reply, { tool: panel });
    };
    if (action) return show(200);
    const read = readForm(panel.tool.inputSchema, request.body);
    if (!read.ok) {
      panel.error = read.error;
      panel.errorField = read.field;
      return show(400);
    }
    try {
      const outcome = await service.call(caller, { deviceId: panel.device.id, tool: panel.tool.name, input: read.input });
      if (outcome.kind === "result") {
        setResult(panel, outcome.result, read.input);
        return show(200);
      }
      panel.proposal = proposalView(outcome.proposal, outcome.proposal.diff ?? "", panel.device.name);
      return show(202);
    } catch (error) {
      // The API's status for the same refusal (504 DEVICE_TIMEOUT, 429 DEVICE_BUSY, 422 a tool's own error…).
      const refusal = hostRefusal(error);
      panel.error = `${refusal.message} (${refusal.code})`;
      return show(refusal.statusCode);
    }
  });
};
