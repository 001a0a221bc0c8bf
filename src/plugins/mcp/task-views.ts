import type { HostService } from "../host/service.js";
import { approvalElicitation, proposalURL } from "./approval.js";
import type { McpCaller } from "./credentials.js";
import { APPROVAL_INPUT_KEY, taskView, type TaskRow, type TaskView } from "./tasks.js";
import { decidedResult, isUndecided } from "./tool-results.js";

/**
 * A task as the client sees it, on `tasks/get` and in `notifications/tasks` alike (the extension wants
 * them identical): a proposal's task takes its status and result from the proposal.
 */
export interface TaskViewContext {
  host: HostService;
  caller: McpCaller;
  /** Where the owner approves proposals (`<base>/devices`). */
  devicesURL: string;
}

export function waitingMessage(devicesURL: string, proposalId: string): string {
  return `Proposed, not applied: waiting for the owner, who approves or rejects it at ${proposalURL(devicesURL, proposalId)}`;
}

export async function detailedTask(context: TaskViewContext, row: TaskRow): Promise<TaskView> {
  if (!row.proposal_id || row.status === "cancelled") return taskView(row);
  const proposal = await context.host.proposal(context.caller.userId, row.proposal_id, context.caller.deviceIds);
  // Until the client answers, a task that asks shows the approval URL as its input request.
  if (proposal.status === "pending" && row.input_url && !row.input_answered_at) {
    const inputRequests = { [APPROVAL_INPUT_KEY]: approvalElicitation(proposal, context.devicesURL, "answer: the task completes when the owner has decided") };
    return taskView(row, { status: "input_required", statusMessage: waitingMessage(context.devicesURL, proposal.id), inputRequests });
  }
  if (isUndecided(proposal)) return taskView(row, { status: "working", statusMessage: waitingMessage(context.devicesURL, proposal.id) });
  const decided = proposal.finishedAt ?? proposal.decidedAt;
  return taskView(row, {
    status: "completed",
    statusMessage: `The proposal is ${proposal.status}`,
    ...(decided ? { lastUpdatedAt: new Date(decided).toISOString() } : {}),
    result: { resultType: "complete", ...decidedResult(proposal, context.devicesURL) },
  });
}
