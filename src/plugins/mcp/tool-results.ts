import type { CallToolResult } from "@modelcontextprotocol/server";
import { fenceUntrusted } from "../../tools/index.js";
import { deviceErrorForModel, devicesForModel, planForModel } from "../host/model-facing.js";
import type { Proposal } from "../host/proposals.js";
import type { DeviceView } from "../host/service.js";
import { proposalURL } from "./approval.js";
import { PROPOSAL_STATUS } from "./catalog.js";
import type { DeviceListOutput, ProposalOutput } from "./outputs.js";

/**
 * The results of Tether's own MCP tools (list_devices, a proposal made, proposal_status) as a model reads them:
 * text, with what a device wrote fenced as untrusted, and the structured copy each tool's output schema describes.
 */

/**
 * The devices, fenced (names, platforms and roots are the devices' own words). The structured copy holds only
 * what the server knows (id, online, new, last seen): a client may hand it to a model as it is, unfenced.
 */
export function listDevicesResult(devices: DeviceView[], devicesURL: string): CallToolResult {
  const known: DeviceListOutput["devices"] = devices.map((device) => ({
    id: device.id,
    online: device.online,
    new: device.isNew,
    lastSeenAt: device.lastSeenAt?.toISOString() ?? null,
  }));
  return { content: [{ type: "text", text: devicesForModel(devices, devicesURL) }], structuredContent: { devices: known } };
}

export function proposedResult(proposal: Proposal, device: Pick<DeviceView, "id">, devicesURL: string): CallToolResult {
  const url = proposalURL(devicesURL, proposal.id);
  const status: ProposalOutput = { proposalId: proposal.id, status: proposal.status, approveAt: url, url, expiresAt: proposal.expiresAt.toISOString() };
  return {
    content: [
      {
        type: "text",
        text:
          `Proposed, NOT applied: nothing on device ${device.id} has changed. Proposal ${proposal.id} waits for the owner, ` +
          `who reviews, approves or rejects it at ${url} (it expires at ${status.expiresAt}). Check it with ${PROPOSAL_STATUS}.`,
      },
      { type: "text", text: planForModel(proposal.summary, proposal.diff ?? "", `${device.id}:${proposal.tool}`) },
    ],
    structuredContent: status,
  };
}

export function proposalStatusResult(proposal: Proposal, devicesURL: string): CallToolResult {
  const status: ProposalOutput = {
    proposalId: proposal.id,
    tool: proposal.tool,
    deviceId: proposal.deviceId,
    status: proposal.status,
    approveAt: proposalURL(devicesURL, proposal.id),
    url: proposalURL(devicesURL, proposal.id),
    expiresAt: proposal.expiresAt.toISOString(),
    // The failure's code only: its message may be the device's, and goes in a fence below.
    ...(proposal.error ? { error: { code: proposal.error.code } } : {}),
  };
  const content: CallToolResult["content"] = [{ type: "text", text: JSON.stringify(status, null, 2) }];
  if (proposal.error)
    content.push({ type: "text", text: `${proposal.error.code}: ${deviceErrorForModel(proposal.error.message, `${proposal.deviceId}:${proposal.tool}`)}` });
  if (proposal.status === "applied" && proposal.result !== null) {
    status.result = fenceUntrusted(proposal.result, `${proposal.deviceId}:${proposal.tool} result`);
    content.push({ type: "text", text: status.result });
  }
  return { content, structuredContent: status };
}

/** Whether the owner has yet to decide a proposal (an approval in progress counts as undecided). */
export function isUndecided(proposal: Pick<Proposal, "status">): boolean {
  return proposal.status === "pending" || proposal.status === "applying";
}

/** A decided proposal as its call's result: applied, the result; rejected, expired or failed, a refusal with the status. */
export function decidedResult(proposal: Proposal, devicesURL: string): CallToolResult {
  const result = proposalStatusResult(proposal, devicesURL);
  return proposal.status === "applied" ? result : { ...result, isError: true };
}
