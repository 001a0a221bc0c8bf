import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyPluginAsync, FastifyReply } from "fastify";
import fp from "fastify-plugin";
import { redirectTo } from "../../http/error-handler.js";
import { notFound, unauthorized } from "../../http/errors.js";
import { hostPerson } from "../../plugins/host/callers.js";
import { rethrowAsHttpError } from "../../plugins/host/errors.js";
import { openSseStream, type SseStream } from "../../plugins/host/sse-channel.js";
import { installCommands } from "../install-commands.js";
import { wantsFragment } from "../render.js";
import { deviceToolPages } from "./device-tool-pages.js";
import { uploadRoute } from "./devices-upload.js";
import { baseURLOf, DEVICES_PATH, devicesPage, downloadsPanel, listDevices, ownerOf, proposalPanel, toolPanel, type ToolPanel } from "./devices-view.js";
import { proposalPages } from "./proposal-pages.js";

export { PROPOSALS_PER_PAGE, RECENT_DECISIONS } from "./devices-view.js";

/**
 * `/devices`: the owner's devices (online or last seen), pairing, revoking, running any tool through
 * a form generated from its input schema (device-tool-pages.ts), and pending proposals with their diff,
 * Approve and Reject (proposal-pages.ts). Registered inside the guarded context (`guardedPagesPlugin`), so
 * every route here is signed-in only. Every flow works without JavaScript; with htmx, actions swap one
 * panel, and the page stays live through `/devices/events` (htmx's SSE extension), which only says *what*
 * changed: the panel concerned fetches itself again. What each panel shows is in devices-view.ts.
 */

const EVENTS_KEEP_ALIVE_MS = 25_000;

const Id = Type.String({ minLength: 1, maxLength: 100 });
const DeviceParams = Type.Object({ id: Id });
const PageQuery = Type.Object({
  device: Type.Optional(Id),
  tool: Type.Optional(Type.String({ maxLength: 128 })),
  notice: Type.Optional(Type.String({ maxLength: 20 })),
  /** The proposals panel's page: the cursor its "next" link carries. */
  proposals: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
});
const PanelQuery = Type.Object({ cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) });

const NOTICES: Record<string, string> = {
  revoked: "Device revoked. Its credential no longer works.",
  acknowledged: "Device confirmed as yours: it is no longer marked new.",
};

/** An action's answer for htmx: a notice, and a trigger that makes the list concerned refresh itself. */
const answer = (reply: FastifyReply, topic: "devices" | "proposals", text: string, kind: "success" | "error" = "success") =>
  reply.header("hx-trigger", `${topic}-changed`).tetherRender("devices/notice", { notice: text, kind });

const routes: FastifyPluginAsync = async (fastify) => {
  // Host refusals become HttpErrors, which the app's one handler renders as error pages.
  fastify.setErrorHandler(rethrowAsHttpError);
  await fastify.register(pageRoutes);
  await fastify.register(liveEvents);
  await fastify.register(deviceActions);
  await fastify.register(deviceToolPages);
  await fastify.register(proposalPages);
  // Its own context: the multipart parser serves this one route only.
  if (fastify.hasDecorator("tetherBlobs")) {
    await fastify.register(
      uploadRoute({
        toolPanel: (owner, deviceId, tool) => toolPanel(fastify, owner, deviceId, tool),
        show: (request, reply, panel: ToolPanel, status) => {
          reply.code(status);
          return wantsFragment(request) ? reply.tetherRender("devices/tool", { tool: panel }) : devicesPage(request, reply, { tool: panel });
        },
      }),
    );
  }
};

/** The page, and each panel alone (what htmx swaps in when the panel's event comes). */
const pageRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  const service = fastify.tetherHost;
  fastify.get(DEVICES_PATH, { schema: { querystring: PageQuery } }, async (request, reply) => {
    const { device, tool, notice, proposals: cursor } = request.query;
    const panel = device && tool ? await toolPanel(fastify, ownerOf(request), device, tool) : undefined;
    const message = notice ? NOTICES[notice] : undefined;
    const aboutDevices = notice === "revoked" || notice === "acknowledged";
    return devicesPage(request, reply, { tool: panel, notice: aboutDevices ? message : undefined, proposalNotice: aboutDevices ? undefined : message }, cursor);
  });

  // The download card alone: it polls itself while an executable is being prepared (devices-downloads.eta).
  fastify.get(`${DEVICES_PATH}/panel/downloads`, async (_request, reply) =>
    reply.tetherRender("devices/downloads", { baseURL: baseURLOf(fastify), ...(await downloadsPanel(fastify)) }),
  );
  fastify.get(`${DEVICES_PATH}/panel/live`, async (_request, reply) => reply.tetherRender("devices/live"));
  // The lists alone (what #devices-list and #proposals-list swap in).
  fastify.get(`${DEVICES_PATH}/panel/devices`, async (request, reply) =>
    reply.tetherRender("devices/items", { devices: await listDevices(fastify, ownerOf(request)) }),
  );
  fastify.get(`${DEVICES_PATH}/panel/proposals`, { schema: { querystring: PanelQuery } }, async (request, reply) => {
    const owner = ownerOf(request);
    return reply.tetherRender("devices/proposal-items", {
      proposalPanel: await proposalPanel(fastify, owner, await service.listDevices(owner), request.query.cursor),
    });
  });
};

/**
 * Live updates: named events only ("devices", "proposals"); each panel re-fetches itself on its event.
 * One stream per open tab, counted against the user's and the browser session's stream caps: past
 * them the new one is refused (429) rather than the oldest closed, since closing would make two tabs
 * over the cap take the slot from each other on every reconnect, while a refused tab still works,
 * only without live updates, and a closed tab frees its slot when its connection ends.
 */
const liveEvents: FastifyPluginAsyncTypebox = async (fastify) => {
  const liveStreams = new Set<SseStream>();
  // A server that stops must not wait for browsers to hang up.
  fastify.addHook("preClose", async () => {
    for (const stream of liveStreams) stream.end();
  });
  fastify.get(`${DEVICES_PATH}/events`, async (request, reply) => {
    const owner = ownerOf(request);
    const session = (await request.getSession())?.session;
    if (!session) throw unauthorized();
    const lease = await fastify.tetherStreams.admit(reply, { kind: "live-view", userId: owner, credential: `session:${session.id}` });
    reply.hijack();
    const stream = openSseStream(reply.raw, EVENTS_KEEP_ALIVE_MS, { "cache-control": "no-store" });
    liveStreams.add(stream);
    const stop = fastify.tetherHost.watch(owner, (topic) => stream.send(`${topic}-changed`, { topic }));
    // A change between the page's render and this stream's start (a device that came online meanwhile), or while a
    // dropped stream reconnected, was never sent here: each panel fetches itself once, now that the stream is live.
    for (const topic of ["devices", "proposals"] as const) stream.send(`${topic}-changed`, { topic });
    void stream.ended.then(() => {
      stop();
      liveStreams.delete(stream);
      lease.release();
    });
  });
};

/** Pairing a new device, revoking one, and confirming a new one is the owner's. */
const deviceActions: FastifyPluginAsyncTypebox = async (fastify) => {
  const service = fastify.tetherHost;
  const ownDevice = async (owner: string, id: string, gone: string) => {
    const device = (await service.listDevices(owner)).find((d) => d.id === id);
    if (!device) throw notFound(gone);
    return device;
  };

  fastify.post(`${DEVICES_PATH}/pair`, async (request, reply) => {
    const { userId: owner } = await hostPerson(request);
    const minted = await service.mintPairingCode(owner);
    const downloads = await fastify.tetherHostDownloads.list();
    const baseURL = baseURLOf(fastify);
    const pair = { code: minted.code, expiresAt: minted.expiresAt, baseURL, commands: installCommands(downloads, { baseURL, pairingCode: minted.code }) };
    if (wantsFragment(request)) return reply.tetherRender("devices/pair", { pair });
    return devicesPage(request, reply, { pair });
  });

  // Without JavaScript, "Revoke" opens this confirmation page; with htmx, hx-confirm asks instead.
  fastify.get(`${DEVICES_PATH}/:id/revoke`, { schema: { params: DeviceParams } }, async (request, reply) => {
    const device = await ownDevice(ownerOf(request), request.params.id, "You have no such device. It may have been revoked already.");
    return reply.tetherRender("devices/revoke", { title: "Revoke device", device });
  });

  fastify.post(`${DEVICES_PATH}/:id/revoke`, { schema: { params: DeviceParams } }, async (request, reply) => {
    const { userId: owner } = await hostPerson(request);
    const device = await ownDevice(owner, request.params.id, "You have no such device. It may have been revoked already.");
    await service.revoke(owner, device.id);
    if (!wantsFragment(request)) return redirectTo(request, reply, `${DEVICES_PATH}?notice=revoked`);
    return answer(reply, "devices", `“${device.name}” revoked. Its credential no longer works.`);
  });

  // A new device stays marked new (here and to MCP clients) until its owner says it is theirs.
  fastify.post(`${DEVICES_PATH}/:id/acknowledge`, { schema: { params: DeviceParams } }, async (request, reply) => {
    const { userId: owner } = await hostPerson(request);
    const device = await ownDevice(owner, request.params.id, "You have no such device. It may have been revoked.");
    await service.acknowledge(owner, device.id);
    if (!wantsFragment(request)) return redirectTo(request, reply, `${DEVICES_PATH}?notice=acknowledged`);
    return answer(reply, "devices", `“${device.name}” confirmed as yours: it is no longer marked new.`);
  });
};

/** The /devices pages, for `guardedPagesPlugin({ pages: [devicePages] })`. */
export const devicePages = fp(routes, {
  name: "tether-device-pages",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-host", "tether-streams", "tether-auth", "tether-page-render", "@fastify/formbody"],
});
