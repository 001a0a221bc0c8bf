import { inputRequired, type InputRequiredResult, type ServerContext } from "@modelcontextprotocol/server";
import { signState, verifyState, type SignedStateKey } from "../../crypto/signed-state.js";
import { proposalPath, type Proposal } from "../host/proposals.js";
import type { McpCaller } from "./credentials.js";

/**
 * Approval inside one tool call (MCP 2026-07-28, for a client that declares URL-mode elicitation): a
 * mutate tool answers `input_required` with a URL elicitation pointing at the proposal's page, where
 * the owner, signed in to Tether, approves or rejects it. Nothing the client sends can approve: its
 * retry only asks how the proposal stands. The `requestState` it echoes is signed with a key derived
 * from the app secret and bound to the user, the credential, the proposal and the tool, and expires
 * with the proposal; anything else is refused before the handler runs (-32602).
 */
export interface ApprovalState {
  /** user id */
  u: string;
  /** credential key (`token:<id>`, `oauth-token:<hash>`) */
  c: string;
  /** proposal id */
  p: string;
  /** tool name */
  t: string;
}

/** Whether this request's client handles URL-mode elicitation (its per-request capabilities). */
export function supportsUrlElicitation(ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const capabilities = envelope?.["io.modelcontextprotocol/clientCapabilities"] as { elicitation?: { url?: unknown } } | undefined;
  return typeof capabilities?.elicitation?.url === "object" && capabilities.elicitation.url !== null;
}

/** The proposal's own page (`<base>/devices/proposals/<id>`), where the owner decides it, from the devices page's address. */
export function proposalURL(devicesURL: string, proposalId: string): string {
  return `${devicesURL.replace(/\/devices$/, "")}${proposalPath(proposalId)}`;
}

/** What a URL elicitation for a proposal says and where it points; `then` says what the client does once the user is done. */
export function approvalRequest(proposal: Pick<Proposal, "id" | "tool" | "deviceId">, devicesURL: string, then: string): { message: string; url: string } {
  const url = proposalURL(devicesURL, proposal.id);
  return {
    message: `Tether needs the owner's approval for ${proposal.tool} on device ${proposal.deviceId} (proposal ${proposal.id}): open ${url} to approve or reject it, then ${then}.`,
    url,
  };
}

/**
 * The URL elicitation that asks the owner to decide a proposal on its page (an `elicitation/create`
 * request in URL mode, as `inputRequests` carry it). At 2025-11-25 the same request is an error (legacy-elicitation.ts).
 */
export function approvalElicitation(proposal: Pick<Proposal, "id" | "tool" | "deviceId">, devicesURL: string, then: string) {
  return inputRequired.elicitUrl(approvalRequest(proposal, devicesURL, then));
}

/** `input_required`: the owner's approval, at the proposal's page; the state to echo on the retry. */
export function askForApproval(key: SignedStateKey, caller: McpCaller, proposal: Proposal, devicesURL: string): InputRequiredResult {
  const state: ApprovalState = { u: caller.userId, c: caller.credentialKey, p: proposal.id, t: proposal.tool };
  return inputRequired({
    inputRequests: { approval: approvalElicitation(proposal, devicesURL, "retry") },
    requestState: signState(key, { ...state }, proposal.expiresAt),
  });
}

/**
 * The `requestState.verify` hook: the payload when it is this key's, unexpired, and names the caller
 * making this request; otherwise it throws (the SDK answers -32602 and logs the reason only).
 */
export function approvalVerifier(key: SignedStateKey) {
  return (state: string, ctx: ServerContext): ApprovalState => {
    const checked = verifyState(key, state);
    if (!checked.ok) throw new Error(`requestState refused: ${checked.reason}`);
    const caller = ctx.http?.authInfo?.extra?.caller as McpCaller | undefined;
    const { u, c, p, t } = checked.payload;
    if (typeof p !== "string" || typeof t !== "string") throw new Error("requestState refused: malformed");
    if (!caller || u !== caller.userId || c !== caller.credentialKey) throw new Error("requestState refused: another user or credential");
    return { u, c, p, t };
  };
}
