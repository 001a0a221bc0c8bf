import { randomUUID } from "node:crypto";
import { ProtocolError, ProtocolErrorCode, type CallToolResult, type ServerContext } from "@modelcontextprotocol/server";
import type { Kysely, Selectable } from "kysely";
import type { Database, McpTaskTable } from "../../db/schema.js";
import type { McpCaller } from "./credentials.js";

/**
 * MCP tasks (the `io.modelcontextprotocol/tasks` extension of MCP 2026-07-28): a `tools/call` that
 * would outlive its request answers with a task, which the client polls with `tasks/get` on any
 * replica. Tether is stateless, so the task is a row of `mcp_task`:
 * - a device call still running after `answerWithinMs` keeps running on the replica that started it,
 *   which writes its result into the row when it ends (a row still `working` past `run_deadline`
 *   belonged to a replica that stopped: the task has failed);
 * - a mutate tool's task names its proposal and takes its status from it: working while the owner
 *   has not decided, then the proposal's outcome. For a client that declared URL-mode elicitation on
 *   the call, the task is first `input_required`, its one input request (key `approval`, never asked
 *   again once answered) the URL of the proposal's page; the client's answer (`tasks/update`) only
 *   says it showed the page: the task is `working` again until the owner decides there.
 * A task belongs to the user and the credential that started it: for anyone else it does not exist.
 * It is kept `ttlMs` from its start (a proposal's task: until the proposal expires, plus `ttlMs`),
 * then it is as unknown as a task that never was, and its row is purged on a later task's creation.
 */

export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
/** How long a task's device call may run (the dispatcher's ceiling): a task is for long calls. */
export const TASK_CALL_TIMEOUT_MS = 10 * 60_000;
/** Suggested polling: a running call every 2 s; a proposal, which waits for a person, every 5 s. */
export const POLL_INTERVAL_MS = { run: 2_000, proposal: 5_000 };
/** Past the call's timeout, how long the replica has to write the result before the task counts as lost. */
const RUN_GRACE_MS = 30_000;

export interface TaskSettings {
  /** How long a task is kept after it starts (a proposal's: after the proposal expires). Default 1 h. */
  ttlMs?: number;
  /** How long a device call may take before its answer is a task instead of its result. Default 1 s. */
  answerWithinMs?: number;
}

export type TaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled";

/** The extension's `DetailedTask`: the task, and its result or error once it has one. */
export interface TaskView {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  pollIntervalMs: number;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
  /** `input_required`: the requests the client answers with `tasks/update`, by key. */
  inputRequests?: Record<string, unknown>;
}

/** The key of a proposal's task's one input request (the approval URL): unique over the task's life. */
export const APPROVAL_INPUT_KEY = "approval";

export type TaskRow = Selectable<McpTaskTable>;

/** A mutate tool's call that ended in a proposal waiting for the owner (a task's, not yet a result). */
export interface ProposedCall {
  proposed: true;
  proposal: { id: string; expiresAt: Date };
}

export function isProposed(outcome: object): outcome is ProposedCall {
  return (outcome as Partial<ProposedCall>).proposed === true;
}

/** Whether this request's client declares the tasks extension (its per-request capabilities). */
export function declaresTasks(ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const capabilities = envelope?.["io.modelcontextprotocol/clientCapabilities"] as { extensions?: Record<string, unknown> } | undefined;
  const declared = capabilities?.extensions?.[TASKS_EXTENSION];
  return typeof declared === "object" && declared !== null;
}

/** `tasks/*` from a client that did not declare the extension: -32021, naming what it lacks. */
export function requireTasks(ctx: ServerContext): void {
  if (declaresTasks(ctx)) return;
  throw new ProtocolError(ProtocolErrorCode.MissingRequiredClientCapability, "Missing required client capability", {
    requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
  });
}

/** The task as the wire carries it; `derived` overrides what the row says (a proposal's status). */
export function taskView(row: TaskRow, derived: Partial<TaskView> = {}): TaskView {
  const created = new Date(row.created_at);
  const view: TaskView = {
    taskId: row.id,
    status: row.status as TaskStatus,
    createdAt: created.toISOString(),
    lastUpdatedAt: new Date(row.updated_at).toISOString(),
    ttlMs: new Date(row.expires_at).getTime() - created.getTime(),
    pollIntervalMs: row.poll_interval_ms,
  };
  if (row.status === "completed" && row.result) view.result = row.result as Record<string, unknown>;
  if (row.status === "failed" && row.error) view.error = row.error as TaskView["error"];
  if (row.status === "working" && row.run_deadline && new Date(row.run_deadline).getTime() < Date.now()) {
    view.status = "failed";
    view.statusMessage = "The server running this call stopped before it finished; call the tool again";
    view.error = { code: ProtocolErrorCode.InternalError, message: view.statusMessage };
  }
  return { ...view, ...derived };
}

/**
 * `tools/call`'s `CreateTaskResult`: the seed state of the task. The SDK, which passes a `resultType`
 * it does not know through on `tools/call`, has no type for it: it is typed as the call's result.
 */
export function createTaskResult(row: TaskRow, derived: Partial<TaskView> = {}): CallToolResult {
  const { result: _result, error: _error, inputRequests: _inputRequests, ...task } = taskView(row, derived);
  return { resultType: "task", ...task } as unknown as CallToolResult;
}

const notFound = (reason: string) => new ProtocolError(ProtocolErrorCode.InvalidParams, `Failed to retrieve task: ${reason}`);

/** The task rows, and the calls this replica runs for them. */
export class McpTasks {
  readonly ttlMs: number;
  readonly answerWithinMs: number;
  /** Calls running on this replica for a task: `tasks/cancel` aborts them, and so does the server's close. */
  private readonly running = new Map<string, AbortController>();

  constructor(
    private readonly db: Kysely<Database>,
    settings: TaskSettings = {},
  ) {
    this.ttlMs = settings.ttlMs ?? 60 * 60_000;
    this.answerWithinMs = settings.answerWithinMs ?? 1_000;
  }

  /**
   * A task for a device call still running: stored (so `tasks/get` answers on any replica) before it
   * is returned. When the call ends its result is written into the row; a mutate tool's call that
   * ends in a proposal turns the task into the proposal's.
   */
  async forRun(caller: McpCaller, tool: string, call: Promise<CallToolResult | ProposedCall>, controller: AbortController, inputURL = false): Promise<TaskRow> {
    const now = Date.now();
    const row = await this.insert(caller, tool, now, {
      poll_interval_ms: POLL_INTERVAL_MS.run,
      run_deadline: new Date(now + TASK_CALL_TIMEOUT_MS + RUN_GRACE_MS),
      expires_at: new Date(now + this.ttlMs),
      input_url: inputURL,
    });
    this.running.set(row.id, controller);
    void call
      .then(
        (outcome) =>
          this.finish(
            row.id,
            isProposed(outcome)
              ? this.proposalFields(outcome.proposal)
              : { status: "completed", result: JSON.stringify({ resultType: "complete", ...outcome }) },
          ),
        (error: unknown) => this.finish(row.id, { status: "failed", error: JSON.stringify({ code: ProtocolErrorCode.InternalError, message: String(error) }) }),
      )
      .catch(() => {})
      .finally(() => this.running.delete(row.id));
    return row;
  }

  /** A task for a proposal waiting for its owner: kept until the proposal expires, and `ttlMs` more. */
  async forProposal(caller: McpCaller, tool: string, proposal: ProposedCall["proposal"], inputURL = false): Promise<TaskRow> {
    const { proposal_id, poll_interval_ms, expires_at } = this.proposalFields(proposal);
    return this.insert(caller, tool, Date.now(), { proposal_id, poll_interval_ms, expires_at, input_url: inputURL });
  }

  /**
   * `tasks/update`: an answer to the task's outstanding approval request marks it answered (whatever
   * the action: the owner decides on Tether, never the client). Answers to any other key, or to one
   * already answered, are ignored, as the extension asks.
   */
  async answer(caller: McpCaller, taskId: string, inputResponses: Record<string, unknown>): Promise<void> {
    const row = await this.find(caller, taskId);
    if (!row.input_url || row.input_answered_at || !Object.hasOwn(inputResponses, APPROVAL_INPUT_KEY)) return;
    const now = new Date();
    await this.db
      .updateTable("mcp_task")
      .set({ input_answered_at: now, updated_at: now })
      .where("id", "=", row.id)
      .where("input_answered_at", "is", null)
      .execute();
  }

  private proposalFields(proposal: ProposedCall["proposal"]) {
    return {
      proposal_id: proposal.id,
      poll_interval_ms: POLL_INTERVAL_MS.proposal,
      run_deadline: null,
      expires_at: new Date(proposal.expiresAt.getTime() + this.ttlMs),
    };
  }

  /** The caller's own task; another user's or credential's, an unknown or an expired one: -32602. */
  async find(caller: McpCaller, taskId: string): Promise<TaskRow> {
    const row = await this.owned(caller).where("id", "=", taskId).executeTakeFirst();
    if (!row) throw notFound("Task not found");
    if (new Date(row.expires_at).getTime() <= Date.now()) throw notFound("Task has expired");
    return row;
  }

  /** The caller's own unexpired tasks among `taskIds` (what a `subscriptions/listen` stream may follow). */
  async findOwn(caller: McpCaller, taskIds: string[]): Promise<TaskRow[]> {
    if (taskIds.length === 0) return [];
    return this.owned(caller).where("id", "in", taskIds).where("expires_at", ">", new Date()).execute();
  }

  /** The caller's tasks: those its user started with this very credential. */
  private owned(caller: McpCaller) {
    return this.db.selectFrom("mcp_task").selectAll().where("user_id", "=", caller.userId).where("credential", "=", caller.credentialKey);
  }

  /** Cancels the caller's task if it is still working (a call running here is aborted); a decided one stays as it is. */
  async cancel(caller: McpCaller, taskId: string): Promise<void> {
    const row = await this.find(caller, taskId);
    await this.db
      .updateTable("mcp_task")
      .set({ status: "cancelled", updated_at: new Date() })
      .where("id", "=", row.id)
      .where("status", "=", "working")
      .execute();
    this.running.get(row.id)?.abort(new Error("The task was cancelled"));
  }

  /** The server stops: the calls it runs for tasks are abandoned (their tasks fail at their deadline). */
  close(): void {
    for (const controller of this.running.values()) controller.abort(new Error("The server is stopping"));
    this.running.clear();
  }

  private async insert(
    caller: McpCaller,
    tool: string,
    now: number,
    fields: { poll_interval_ms: number; expires_at: Date; run_deadline?: Date; proposal_id?: string; input_url?: boolean },
  ): Promise<TaskRow> {
    // Expired tasks are unknown already; their rows go here, a few at a time, off no one's read path.
    await this.db
      .deleteFrom("mcp_task")
      .where("id", "in", (query) => query.selectFrom("mcp_task").select("id").where("expires_at", "<", new Date()).limit(100))
      .execute();
    return this.db
      .insertInto("mcp_task")
      .values({
        id: randomUUID(),
        user_id: caller.userId,
        credential: caller.credentialKey,
        tool,
        status: "working",
        created_at: new Date(now),
        updated_at: new Date(now),
        ...fields,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  private async finish(
    taskId: string,
    outcome: Partial<Pick<TaskRow, "status" | "proposal_id" | "poll_interval_ms" | "run_deadline" | "expires_at">> & { result?: string; error?: string },
  ): Promise<void> {
    // A cancelled task stays cancelled, whatever the call did after.
    await this.db
      .updateTable("mcp_task")
      .set({ ...outcome, updated_at: new Date() })
      .where("id", "=", taskId)
      .where("status", "=", "working")
      .execute();
  }
}
