import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
// Only package entries: this plugin is what an embedding team would write against tether/host.
import { HttpError, notFound, redirectTo } from "../../http/index.js";
import {
  HostError,
  hostCaller,
  hostPerson,
  hostRefusal,
  openSseStream,
  rethrowAsHttpError,
  shownPart,
  type DeviceView,
  type proposals,
  type ShownDiff,
  type SseStream,
} from "../../plugins/host/index.js";
import { agentVersion, isOlderVersion } from "../../protocol/index.js";
import { signedInUser } from "../guard.js";
import { wantsFragment } from "../render.js";
import { diffLines, formFields, readForm, type FormBody } from "../schema-form.js";

type Proposal = proposals.Proposal;

/**
 * `/devices`: the owner's devices (online or last seen), pairing, revoking, running any tool through
 * a form generated from its input schema, and pending proposals with their diff, Approve and Reject.
 * Registered inside the guarded context (`guardedPagesPlugin`), so every route here is signed-in
 * only. Every flow works without JavaScript; with htmx, actions swap one panel, and the page stays
 * live through `/devices/events` (htmx's SSE extension), which only says *what* changed: the panel
 * concerned fetches itself again.
 */

const DEVICES_PATH = "/devices";
const EVENTS_KEEP_ALIVE_MS = 25_000;
/**
 * Live-update streams one user may hold open in this process (one per open /devices tab). The next one
 * is refused with 429 rather than closing the oldest: closing would make two tabs over the cap take the
 * slot from each other on every reconnect, while a refused tab still works, only without live updates,
 * and a closed tab frees its slot when its connection ends.
 */
export const MAX_LIVE_STREAMS_PER_USER = 16;

const Id = Type.String({ minLength: 1, maxLength: 100 });
const DeviceParams = Type.Object({ id: Id });
const ToolParams = Type.Object({ id: Id, tool: Type.String({ minLength: 1, maxLength: 128 }) });
const PageQuery = Type.Object({
  device: Type.Optional(Id),
  tool: Type.Optional(Type.String({ maxLength: 128 })),
  notice: Type.Optional(Type.String({ maxLength: 20 })),
});
/** Form fields are strings (or repeated strings); the tool's schema says what they mean. */
const ToolForm = Type.Record(Type.String({ maxLength: 200 }), Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 100 })]));

const NOTICES: Record<string, string> = {
  revoked: "Device revoked. Its credential no longer works.",
  applied: "Change applied.",
  rejected: "Proposal rejected.",
};

/** What the tool panel shows: the form, and the last run's outcome. */
interface ToolPanel {
  device: DeviceView;
  tool: DeviceView["tools"][number];
  fields: ReturnType<typeof formFields>;
  error?: string;
  errorField?: string;
  result?: string;
  proposal?: ProposalView;
}

interface ProposalView extends Proposal {
  deviceName: string;
  /** The lines a page renders: the start of the diff only, when it is over the shown limits. */
  lines: ReturnType<typeof diffLines>;
  shown: Omit<ShownDiff, "text">;
}

/** A proposal as a page shows it: its diff cut to what a page may render (see diff-limits.ts). */
function proposalView(proposal: Proposal, deviceName: string): ProposalView {
  const { text, ...shown } = shownPart(proposal.diff);
  return { ...proposal, deviceName, lines: diffLines(text), shown };
}

const routes: FastifyPluginAsync = async (instance) => {
  const fastify = instance.withTypeProvider<TypeBoxTypeProvider>();
  const service = fastify.tetherHost;
  // Host refusals become HttpErrors, which the app's one handler renders as error pages.
  fastify.setErrorHandler(rethrowAsHttpError);
  const baseURL = String(fastify.tetherAuth.options.baseURL).replace(/\/$/, "");
  const liveStreams = new Set<SseStream>();
  // A server that stops must not wait for browsers to hang up.
  fastify.addHook("preClose", async () => {
    for (const stream of liveStreams) stream.end();
  });

  const userId = (request: FastifyRequest) => signedInUser(request).id;

  const proposalViews = async (owner: string, devices: DeviceView[]): Promise<ProposalView[]> => {
    const names = new Map(devices.map((device) => [device.id, device.name]));
    return (await service.pendingProposals(owner)).map((proposal) => proposalView(proposal, names.get(proposal.deviceId) ?? "device"));
  };

  const toolPanel = async (owner: string, deviceId: string, toolName: string, submitted?: FormBody): Promise<ToolPanel> => {
    let device: DeviceView;
    try {
      device = await service.device(owner, deviceId);
    } catch (error) {
      if (error instanceof HostError) throw notFound("You have no such device. It may have been revoked.");
      throw error;
    }
    const tool = device.tools.find((candidate) => candidate.name === toolName);
    if (!tool) throw notFound(`“${device.name}” has no tool named “${toolName.slice(0, 64)}”.`);
    return { device, tool, fields: formFields(tool.inputSchema, submitted) };
  };

  /** The owner's devices, each running an older tether-host than the one on offer noted with it. */
  const listDevices = async (owner: string) => {
    const offered = await fastify.tetherHostDownloads.version();
    return (await service.listDevices(owner)).map((device) => {
      const running = agentVersion(device.agent);
      return { ...device, updateTo: running && isOlderVersion(running, offered) ? offered : undefined };
    });
  };

  /** The whole page; any panel may carry extras (a pairing code, a tool run, a notice). */
  const page = async (request: FastifyRequest, reply: FastifyReply, extras: Record<string, unknown> = {}) => {
    const owner = userId(request);
    const devices = await listDevices(owner);
    return reply.render("devices", {
      title: "Devices",
      devices,
      downloads: await fastify.tetherHostDownloads.list(),
      baseURL,
      proposals: await proposalViews(owner, devices),
      pair: undefined,
      tool: undefined,
      notice: undefined,
      proposalNotice: undefined,
      proposalNoticeKind: "success",
      ...extras,
    });
  };

  /** The lists alone (what #devices-list and #proposals-list swap in). */
  const deviceItems = async (request: FastifyRequest, reply: FastifyReply) =>
    reply.render("devices-items", { devices: await listDevices(userId(request)) });

  const proposalItems = async (request: FastifyRequest, reply: FastifyReply) => {
    const owner = userId(request);
    return reply.render("devices-proposal-items", { proposals: await proposalViews(owner, await service.listDevices(owner)) });
  };

  /** An action's answer for htmx: a notice, and a trigger that makes the list concerned refresh itself. */
  const answer = (reply: FastifyReply, topic: "devices" | "proposals", text: string, kind: "success" | "error" = "success") =>
    reply.header("hx-trigger", `${topic}-changed`).render("devices-notice", { notice: text, kind });

  fastify.get(DEVICES_PATH, { schema: { querystring: PageQuery } }, async (request, reply) => {
    const { device, tool, notice } = request.query;
    const panel = device && tool ? await toolPanel(userId(request), device, tool) : undefined;
    const message = notice ? NOTICES[notice] : undefined;
    return page(request, reply, { tool: panel, notice: notice === "revoked" ? message : undefined, proposalNotice: notice !== "revoked" ? message : undefined });
  });

  fastify.get(`${DEVICES_PATH}/panel/live`, async (_request, reply) => reply.render("devices-live"));
  fastify.get(`${DEVICES_PATH}/panel/devices`, async (request, reply) => deviceItems(request, reply));
  fastify.get(`${DEVICES_PATH}/panel/proposals`, async (request, reply) => proposalItems(request, reply));

  // Live updates: named events only ("devices", "proposals"); each panel re-fetches itself on its event.
  const streamsPerUser = new Map<string, number>();
  fastify.get(`${DEVICES_PATH}/events`, async (request, reply) => {
    const owner = userId(request);
    const open = streamsPerUser.get(owner) ?? 0;
    if (open >= MAX_LIVE_STREAMS_PER_USER) {
      reply.header("retry-after", String(Math.round(EVENTS_KEEP_ALIVE_MS / 1000)));
      throw new HttpError(429, "TOO_MANY_STREAMS", `You already have ${open} live /devices pages open; close one, or reload this page later for live updates`);
    }
    streamsPerUser.set(owner, open + 1);
    reply.hijack();
    const stream = openSseStream(reply.raw, EVENTS_KEEP_ALIVE_MS, { "cache-control": "no-store" });
    liveStreams.add(stream);
    const stop = service.watch(owner, (topic) => stream.send(`${topic}-changed`, { topic }));
    void stream.ended.then(() => {
      stop();
      liveStreams.delete(stream);
      const left = (streamsPerUser.get(owner) ?? 1) - 1;
      if (left > 0) streamsPerUser.set(owner, left);
      else streamsPerUser.delete(owner);
    });
  });

  fastify.post(`${DEVICES_PATH}/pair`, async (request, reply) => {
    const { userId: owner } = await hostPerson(request);
    const minted = await service.mintPairingCode(owner);
    const pair = {
      code: minted.code,
      expiresAt: minted.expiresAt,
      command: `TETHER_SERVER_URL=${baseURL} TETHER_PAIRING_CODE=${minted.code} tether-host`,
    };
    if (wantsFragment(request)) return reply.render("devices-pair", { pair });
    return page(request, reply, { pair });
  });

  // Without JavaScript, "Revoke" opens this confirmation page; with htmx, hx-confirm asks instead.
  fastify.get(`${DEVICES_PATH}/:id/revoke`, { schema: { params: DeviceParams } }, async (request, reply) => {
    const device = (await service.listDevices(userId(request))).find((d) => d.id === request.params.id);
    if (!device) throw notFound("You have no such device. It may have been revoked already.");
    return reply.render("devices-revoke", { title: "Revoke device", device });
  });

  fastify.post(`${DEVICES_PATH}/:id/revoke`, { schema: { params: DeviceParams } }, async (request, reply) => {
    const { userId: owner } = await hostPerson(request);
    const device = (await service.listDevices(owner)).find((d) => d.id === request.params.id);
    if (!device) throw notFound("You have no such device. It may have been revoked already.");
    await service.revoke(owner, device.id);
    if (!wantsFragment(request)) return redirectTo(request, reply, `${DEVICES_PATH}?notice=revoked`);
    return answer(reply, "devices", `“${device.name}” revoked. Its credential no longer works.`);
  });

  fastify.get(`${DEVICES_PATH}/:id/tools/:tool`, { schema: { params: ToolParams } }, async (request, reply) => {
    const panel = await toolPanel(userId(request), request.params.id, request.params.tool);
    if (wantsFragment(request)) return reply.render("devices-tool", { tool: panel });
    return page(request, reply, { tool: panel });
  });

  fastify.post(`${DEVICES_PATH}/:id/tools/:tool`, { schema: { params: ToolParams, body: ToolForm } }, async (request, reply) => {
    const caller = await hostCaller(request);
    const panel = await toolPanel(caller.userId, request.params.id, request.params.tool, request.body);
    const show = (status: number) => {
      reply.code(status);
      return wantsFragment(request) ? reply.render("devices-tool", { tool: panel }) : page(request, reply, { tool: panel });
    };
    const read = readForm(panel.tool.inputSchema, request.body);
    if (!read.ok) {
      panel.error = read.error;
      panel.errorField = read.field;
      return show(400);
    }
    try {
      const outcome = await service.call(caller, { deviceId: panel.device.id, tool: panel.tool.name, input: read.input });
      if (outcome.kind === "result") {
        panel.result = JSON.stringify(outcome.result, null, 2);
        return show(200);
      }
      panel.proposal = proposalView(outcome.proposal, panel.device.name);
      return show(202);
    } catch (error) {
      // The API's status for the same refusal (504 DEVICE_TIMEOUT, 429 DEVICE_BUSY, 422 a tool's own error…).
      const refusal = hostRefusal(error);
      panel.error = `${refusal.message} (${refusal.code})`;
      return show(refusal.statusCode);
    }
  });

  // The whole stored diff, for a proposal too large to show on the page: a download, never rendered.
  fastify.get(`${DEVICES_PATH}/proposals/:id/diff`, { schema: { params: DeviceParams } }, async (request, reply) => {
    const proposal = await service.proposal(userId(request), request.params.id).catch((error: unknown) => {
      if (error instanceof HostError) throw notFound("You have no such proposal.");
      throw error;
    });
    return reply
      .type("text/plain; charset=utf-8")
      .header("content-disposition", `attachment; filename="proposal-${proposal.id}.diff"`)
      .send(proposal.diff);
  });

  for (const decision of ["approve", "reject"] as const) {
    fastify.post(`${DEVICES_PATH}/proposals/:id/${decision}`, { schema: { params: DeviceParams } }, async (request, reply) => {
      const caller = await hostPerson(request);
      let outcome: { kind: "success" | "error"; text: string };
      try {
        if (decision === "approve") {
          await service.approve(caller, request.params.id);
          outcome = { kind: "success", text: "Change applied." };
        } else {
          await service.reject(caller, request.params.id);
          outcome = { kind: "success", text: "Proposal rejected." };
        }
      } catch (error) {
        const refusal = hostRefusal(error);
        outcome = { kind: "error", text: `${decision === "approve" ? "Not applied" : "Not rejected"}: ${refusal.message} (${refusal.code})` };
        reply.code(refusal.statusCode);
      }
      if (!wantsFragment(request)) {
        if (outcome.kind === "success") return redirectTo(request, reply, `${DEVICES_PATH}?notice=${decision === "approve" ? "applied" : "rejected"}`);
        return page(request, reply, { proposalNotice: outcome.text, proposalNoticeKind: "error" });
      }
      return answer(reply, "proposals", outcome.text, outcome.kind);
    });
  }
};

/** The /devices pages, for `guardedPagesPlugin({ pages: [devicePages] })`. */
export const devicePages = fp(routes, {
  name: "tether-device-pages",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-host", "tether-auth", "tether-page-render", "@fastify/formbody"],
});
