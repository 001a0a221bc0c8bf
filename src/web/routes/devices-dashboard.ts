import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { redirectTo } from "../../http/error-handler.js";
import { notFound, unauthorized } from "../../http/errors.js";
import { hostCaller, hostPerson } from "../../plugins/host/callers.js";
import { MAX_SHOWN_DIFF_BYTES, sharedLimits } from "../../plugins/host/diff-limits.js";
import { HostError, hostRefusal, rethrowAsHttpError } from "../../plugins/host/errors.js";
import type { DeviceView } from "../../plugins/host/service.js";
import { openSseStream, type SseStream } from "../../plugins/host/sse-channel.js";
import { agentVersion, isOlderVersion } from "../../protocol/versions.js";
import { signedInUser } from "../guard.js";
import { installCommands, platformLabel, unavailablePlatforms } from "../install-commands.js";
import { wantsFragment } from "../render.js";
import { decidedView, proposalView, type DecidedView, type ProposalView } from "../proposal-view.js";
import { formAction, formFields, readForm, type FormAction, type FormBody } from "../schema-form.js";
import { proposalPages } from "./proposal-pages.js";
import { UPLOAD_TOOL, uploadRoute } from "./devices-upload.js";
import { resultView, type ResultView } from "../result-view.js";

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
 * Pending proposals on one page. With the diffs sharing one diff's render limits (`sharedLimits`) and
 * summaries bounded by the protocol, a page stays bounded in size and render time however many
 * proposals wait and whatever their devices sent.
 */
export const PROPOSALS_PER_PAGE = 10;
/** Decided proposals listed under the pending ones. */
export const RECENT_DECISIONS = 10;

const Id = Type.String({ minLength: 1, maxLength: 100 });
const DeviceParams = Type.Object({ id: Id });
const ToolParams = Type.Object({ id: Id, tool: Type.String({ minLength: 1, maxLength: 128 }) });
const PageQuery = Type.Object({
  device: Type.Optional(Id),
  tool: Type.Optional(Type.String({ maxLength: 128 })),
  notice: Type.Optional(Type.String({ maxLength: 20 })),
  /** The proposals panel's page: the cursor its "next" link carries. */
  proposals: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
});
const PanelQuery = Type.Object({ cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) });
/** Form fields are strings (or repeated strings); the tool's schema says what they mean. */
const ToolForm = Type.Record(Type.String({ maxLength: 200 }), Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 100 })]));

const NOTICES: Record<string, string> = {
  revoked: "Device revoked. Its credential no longer works.",
  acknowledged: "Device confirmed as yours: it is no longer marked new.",
};

/** What the tool panel shows: the form, and the last run's outcome. */
interface ToolPanel {
  device: DeviceView;
  tool: DeviceView["tools"][number];
  fields: ReturnType<typeof formFields>;
  error?: string;
  errorField?: string;
  result?: string;
  /** The result as people read it (a table, numbered lines, labelled values), beside the raw JSON. */
  view?: ResultView;
  proposal?: ProposalView;
  /** write_file with blobs on: the panel offers a file upload too (`devices-upload.ts`). */
  upload?: boolean;
}

/** The proposals panel: one page of them, how many wait in all, and where the next page starts. */
interface ProposalPanel {
  proposals: ProposalView[];
  /** The latest decided, failed and expired ones, newest first. */
  recent: DecidedView[];
  total: number;
  cursor: string | undefined;
  nextCursor: string | null;
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
  const uploads = fastify.hasDecorator("tetherBlobs");

  /** One page of pending proposals: only the start of each diff is read, and the page's diffs share one diff's limits. */
  const proposalPanel = async (owner: string, devices: DeviceView[], cursor?: string): Promise<ProposalPanel> => {
    const names = new Map(devices.map((device) => [device.id, device.name]));
    const page = await service.pendingWithDiffs(owner, { cursor, limit: PROPOSALS_PER_PAGE, diffHeadChars: MAX_SHOWN_DIFF_BYTES });
    const recent = await service.recentlyDecided(owner, RECENT_DECISIONS);
    const limits = sharedLimits(page.proposals.map((proposal) => ({ bytes: proposal.diffBytes, lines: proposal.diffLines })));
    return {
      proposals: page.proposals.map((proposal, index) => proposalView(proposal, proposal.diffHead, names.get(proposal.deviceId) ?? "device", limits[index])),
      recent: recent.map((proposal) => decidedView(proposal, names.get(proposal.deviceId) ?? "device")),
      total: page.total,
      cursor,
      nextCursor: page.nextCursor,
    };
  };

  const toolPanel = async (owner: string, deviceId: string, toolName: string, submitted?: FormBody, action?: FormAction): Promise<ToolPanel> => {
    let device: DeviceView;
    try {
      device = await service.device(owner, deviceId);
    } catch (error) {
      if (error instanceof HostError) throw notFound("You have no such device. It may have been revoked.");
      throw error;
    }
    const tool = device.tools.find((candidate) => candidate.name === toolName);
    if (!tool) throw notFound(`“${device.name}” has no tool named “${toolName.slice(0, 64)}”.`);
    return { device, tool, fields: formFields(tool.inputSchema, submitted, action), ...(uploads && tool.name === UPLOAD_TOOL ? { upload: true } : {}) };
  };

  /**
   * The owner's devices, each running an older tether-host than the one on offer noted with it, and marked
   * outdated below the server's minimum version.
   */
  const listDevices = async (owner: string) => {
    const offered = await fastify.tetherHostDownloads.version();
    const minimum = fastify.tetherHostMinimumVersion;
    return (await service.listDevices(owner)).map((device) => {
      const running = agentVersion(device.agent);
      return {
        ...device,
        updateTo: running && isOlderVersion(running, offered) ? offered : undefined,
        outdated: running !== undefined && minimum !== undefined && isOlderVersion(running, minimum) ? minimum : undefined,
      };
    });
  };

  /** The download card: each executable on offer with the command that starts it (device authorization, no code). */
  const downloadsPanel = async () => {
    const [listed, build] = await Promise.all([fastify.tetherHostDownloads.list(), fastify.tetherHostDownloads.buildStatus()]);
    // An executable being built again (it was out of date) is not offered until the new one is there.
    const downloads = build?.state === "preparing" ? listed.filter((download) => download.platform !== build.platform) : listed;
    return { downloads, installCommands: installCommands(downloads, { baseURL }), build, unavailable: unavailablePlatforms(downloads), platformLabel };
  };

  /** The whole page; any panel may carry extras (a pairing code, a tool run, a notice). */
  const page = async (request: FastifyRequest, reply: FastifyReply, extras: Record<string, unknown> = {}, proposalsCursor?: string) => {
    const owner = userId(request);
    const devices = await listDevices(owner);
    return reply.tetherRender("devices/page", {
      title: "Devices",
      devices,
      ...(await downloadsPanel()),
      baseURL,
      proposalPanel: await proposalPanel(owner, devices, proposalsCursor),
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
    reply.tetherRender("devices/items", { devices: await listDevices(userId(request)) });

  const proposalItems = async (request: FastifyRequest, reply: FastifyReply, cursor?: string) => {
    const owner = userId(request);
    return reply.tetherRender("devices/proposal-items", { proposalPanel: await proposalPanel(owner, await service.listDevices(owner), cursor) });
  };

  /** An action's answer for htmx: a notice, and a trigger that makes the list concerned refresh itself. */
  const answer = (reply: FastifyReply, topic: "devices" | "proposals", text: string, kind: "success" | "error" = "success") =>
    reply.header("hx-trigger", `${topic}-changed`).tetherRender("devices/notice", { notice: text, kind });

  fastify.get(DEVICES_PATH, { schema: { querystring: PageQuery } }, async (request, reply) => {
    const { device, tool, notice, proposals: cursor } = request.query;
    const panel = device && tool ? await toolPanel(userId(request), device, tool) : undefined;
    const message = notice ? NOTICES[notice] : undefined;
    const aboutDevices = notice === "revoked" || notice === "acknowledged";
    return page(request, reply, { tool: panel, notice: aboutDevices ? message : undefined, proposalNotice: aboutDevices ? undefined : message }, cursor);
  });

  // The download card alone: it polls itself while an executable is being prepared (devices-downloads.eta).
  fastify.get(`${DEVICES_PATH}/panel/downloads`, async (_request, reply) => reply.tetherRender("devices/downloads", { baseURL, ...(await downloadsPanel()) }));
  fastify.get(`${DEVICES_PATH}/panel/live`, async (_request, reply) => reply.tetherRender("devices/live"));
  fastify.get(`${DEVICES_PATH}/panel/devices`, async (request, reply) => deviceItems(request, reply));
  fastify.get(`${DEVICES_PATH}/panel/proposals`, { schema: { querystring: PanelQuery } }, async (request, reply) => proposalItems(request, reply, request.query.cursor));

  // Live updates: named events only ("devices", "proposals"); each panel re-fetches itself on its event.
  // One stream per open tab, counted against the user's and the browser session's stream caps: past
  // them the new one is refused (429) rather than the oldest closed, since closing would make two tabs
  // over the cap take the slot from each other on every reconnect, while a refused tab still works,
  // only without live updates, and a closed tab frees its slot when its connection ends.
  fastify.get(`${DEVICES_PATH}/events`, async (request, reply) => {
    const owner = userId(request);
    const session = (await request.getSession())?.session;
    if (!session) throw unauthorized();
    const lease = await fastify.tetherStreams.admit(reply, { kind: "live-view", userId: owner, credential: `session:${session.id}` });
    reply.hijack();
    const stream = openSseStream(reply.raw, EVENTS_KEEP_ALIVE_MS, { "cache-control": "no-store" });
    liveStreams.add(stream);
    const stop = service.watch(owner, (topic) => stream.send(`${topic}-changed`, { topic }));
    void stream.ended.then(() => {
      stop();
      liveStreams.delete(stream);
      lease.release();
    });
  });

  fastify.post(`${DEVICES_PATH}/pair`, async (request, reply) => {
    const { userId: owner } = await hostPerson(request);
    const minted = await service.mintPairingCode(owner);
    const downloads = await fastify.tetherHostDownloads.list();
    const pair = { code: minted.code, expiresAt: minted.expiresAt, baseURL, commands: installCommands(downloads, { baseURL, pairingCode: minted.code }) };
    if (wantsFragment(request)) return reply.tetherRender("devices/pair", { pair });
    return page(request, reply, { pair });
  });

  // Without JavaScript, "Revoke" opens this confirmation page; with htmx, hx-confirm asks instead.
  fastify.get(`${DEVICES_PATH}/:id/revoke`, { schema: { params: DeviceParams } }, async (request, reply) => {
    const device = (await service.listDevices(userId(request))).find((d) => d.id === request.params.id);
    if (!device) throw notFound("You have no such device. It may have been revoked already.");
    return reply.tetherRender("devices/revoke", { title: "Revoke device", device });
  });

  fastify.post(`${DEVICES_PATH}/:id/revoke`, { schema: { params: DeviceParams } }, async (request, reply) => {
    const { userId: owner } = await hostPerson(request);
    const device = (await service.listDevices(owner)).find((d) => d.id === request.params.id);
    if (!device) throw notFound("You have no such device. It may have been revoked already.");
    await service.revoke(owner, device.id);
    if (!wantsFragment(request)) return redirectTo(request, reply, `${DEVICES_PATH}?notice=revoked`);
    return answer(reply, "devices", `“${device.name}” revoked. Its credential no longer works.`);
  });

  // A new device stays marked new (here and to MCP clients) until its owner says it is theirs.
  fastify.post(`${DEVICES_PATH}/:id/acknowledge`, { schema: { params: DeviceParams } }, async (request, reply) => {
    const { userId: owner } = await hostPerson(request);
    const device = (await service.listDevices(owner)).find((d) => d.id === request.params.id);
    if (!device) throw notFound("You have no such device. It may have been revoked.");
    await service.acknowledge(owner, device.id);
    if (!wantsFragment(request)) return redirectTo(request, reply, `${DEVICES_PATH}?notice=acknowledged`);
    return answer(reply, "devices", `“${device.name}” confirmed as yours: it is no longer marked new.`);
  });

  // A read tool's link (a folder in a listing, "show more" of a file) runs it: `?arg.path=…` fills the form.
  fastify.get(`${DEVICES_PATH}/:id/tools/:tool`, { schema: { params: ToolParams, querystring: ToolForm } }, async (request, reply) => {
    const query = request.query;
    const linked = Object.keys(query).some((key) => key.startsWith("arg."));
    const caller = await hostCaller(request);
    const panel = await toolPanel(caller.userId, request.params.id, request.params.tool, linked ? query : undefined);
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
    return page(request, reply, { tool: panel });
  });

  fastify.post(`${DEVICES_PATH}/:id/tools/:tool`, { schema: { params: ToolParams, body: ToolForm } }, async (request, reply) => {
    const caller = await hostCaller(request);
    // "Add another …" or "Remove": the same form again, values kept, with one item more or less; nothing runs.
    const action = formAction(request.body);
    const panel = await toolPanel(caller.userId, request.params.id, request.params.tool, request.body, action);
    const show = (status: number) => {
      reply.code(status);
      return wantsFragment(request) ? reply.tetherRender("devices/tool", { tool: panel }) : page(request, reply, { tool: panel });
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

  await fastify.register(proposalPages);
  // Its own context: the multipart parser serves this one route only.
  if (uploads) {
    const show = (request: FastifyRequest, reply: FastifyReply, panel: ToolPanel, status: number) => {
      reply.code(status);
      return wantsFragment(request) ? reply.tetherRender("devices/tool", { tool: panel }) : page(request, reply, { tool: panel });
    };
    await fastify.register(uploadRoute({ toolPanel: (owner, deviceId, tool) => toolPanel(owner, deviceId, tool), show }));
  }
};

function setResult(panel: ToolPanel, result: unknown, input: unknown): void {
  panel.result = JSON.stringify(result, null, 2);
  panel.view = resultView(panel.device.id, panel.tool.name, result, input);
}

/** The /devices pages, for `guardedPagesPlugin({ pages: [devicePages] })`. */
export const devicePages = fp(routes, {
  name: "tether-device-pages",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-host", "tether-streams", "tether-auth", "tether-page-render", "@fastify/formbody"],
});
