import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { notFound } from "../../http/errors.js";
import { MAX_SHOWN_DIFF_BYTES, sharedLimits } from "../../plugins/host/diff-limits.js";
import { HostError } from "../../plugins/host/errors.js";
import type { DeviceView } from "../../plugins/host/service.js";
import { agentVersion, isOlderVersion } from "../../protocol/versions.js";
import { signedInUser } from "../guard.js";
import { installCommands, platformLabel, unavailablePlatforms } from "../install-commands.js";
import { decidedView, proposalView, type DecidedView, type ProposalView } from "../proposal-view.js";
import { resultView, type ResultView } from "../result-view.js";
import { formFields, type FormAction, type FormBody } from "../schema-form.js";
import { UPLOAD_TOOL } from "./devices-upload.js";

/**
 * What the /devices page shows, panel by panel (the device list, the downloads card, a tool's form and
 * outcome, the pending proposals), and the whole page around them: shared by the page's routes
 * (devices-dashboard.ts) and its tool routes (device-tool-pages.ts).
 */

export const DEVICES_PATH = "/devices";
/**
 * Pending proposals on one page. With the diffs sharing one diff's render limits (`sharedLimits`) and
 * summaries bounded by the protocol, a page stays bounded in size and render time however many
 * proposals wait and whatever their devices sent.
 */
export const PROPOSALS_PER_PAGE = 10;
/** Decided proposals listed under the pending ones. */
export const RECENT_DECISIONS = 10;

/** What the tool panel shows: the form, and the last run's outcome. */
export interface ToolPanel {
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

export const ownerOf = (request: FastifyRequest) => signedInUser(request).id;

/** The server's public base URL, without a trailing slash (the install commands name it). */
export const baseURLOf = (fastify: FastifyInstance) => String(fastify.tetherAuth.options.baseURL).replace(/\/$/, "");

/** One page of pending proposals: only the start of each diff is read, and the page's diffs share one diff's limits. */
export async function proposalPanel(fastify: FastifyInstance, owner: string, devices: DeviceView[], cursor?: string): Promise<ProposalPanel> {
  const service = fastify.tetherHost;
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
}

/** A tool's form on one of the owner's devices (404 for a device or tool that is not there). */
export async function toolPanel(
  fastify: FastifyInstance,
  owner: string,
  deviceId: string,
  toolName: string,
  submitted?: FormBody,
  action?: FormAction,
): Promise<ToolPanel> {
  let device: DeviceView;
  try {
    device = await fastify.tetherHost.device(owner, deviceId);
  } catch (error) {
    if (error instanceof HostError) throw notFound("You have no such device. It may have been revoked.");
    throw error;
  }
  const tool = device.tools.find((candidate) => candidate.name === toolName);
  if (!tool) throw notFound(`“${device.name}” has no tool named “${toolName.slice(0, 64)}”.`);
  const upload = tool.name === UPLOAD_TOOL && fastify.hasDecorator("tetherBlobs");
  return { device, tool, fields: formFields(tool.inputSchema, submitted, action), ...(upload ? { upload } : {}) };
}

/** A read or action tool's result in the tool panel: the raw JSON and the readable view. */
export function setResult(panel: ToolPanel, result: unknown, input: unknown): void {
  panel.result = JSON.stringify(result, null, 2);
  panel.view = resultView(panel.device.id, panel.tool.name, result, input);
}

/**
 * The owner's devices, each running an older tether-host than the one on offer noted with it, and marked
 * outdated below the server's minimum version.
 */
export async function listDevices(fastify: FastifyInstance, owner: string) {
  const offered = await fastify.tetherHostDownloads.version();
  const minimum = fastify.tetherHostMinimumVersion;
  return (await fastify.tetherHost.listDevices(owner)).map((device) => {
    const running = agentVersion(device.agent);
    return {
      ...device,
      updateTo: running && isOlderVersion(running, offered) ? offered : undefined,
      outdated: running !== undefined && minimum !== undefined && isOlderVersion(running, minimum) ? minimum : undefined,
    };
  });
}

/** The download card: each executable on offer with the command that starts it (device authorization, no code). */
export async function downloadsPanel(fastify: FastifyInstance) {
  const [listed, build] = await Promise.all([fastify.tetherHostDownloads.list(), fastify.tetherHostDownloads.buildStatus()]);
  // An executable being built again (it was out of date) is not offered until the new one is there.
  const downloads = build?.state === "preparing" ? listed.filter((download) => download.platform !== build.platform) : listed;
  return {
    downloads,
    installCommands: installCommands(downloads, { baseURL: baseURLOf(fastify) }),
    build,
    unavailable: unavailablePlatforms(downloads),
    platformLabel,
  };
}

/** The whole page; any panel may carry extras (a pairing code, a tool run, a notice). */
export async function devicesPage(request: FastifyRequest, reply: FastifyReply, extras: Record<string, unknown> = {}, proposalsCursor?: string) {
  const fastify = request.server;
  const owner = ownerOf(request);
  const devices = await listDevices(fastify, owner);
  return reply.tetherRender("devices/page", {
    title: "Devices",
    devices,
    ...(await downloadsPanel(fastify)),
    baseURL: baseURLOf(fastify),
    proposalPanel: await proposalPanel(fastify, owner, devices, proposalsCursor),
    pair: undefined,
    tool: undefined,
    notice: undefined,
    proposalNotice: undefined,
    proposalNoticeKind: "success",
    ...extras,
  });
}
