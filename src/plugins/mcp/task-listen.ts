import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { StreamLease } from "../../http/stream-limits.js";
import { openSseStream } from "../host/sse-channel.js";
import type { McpCaller } from "./credentials.js";
import { SERVER_INFO } from "./mcp-server.js";
import { watchStream } from "./streams.js";
import { detailedTask, type TaskViewContext } from "./task-views.js";
import { TASKS_EXTENSION, type McpTasks, type TaskView } from "./tasks.js";

/**
 * Task status notifications (the tasks extension, over 2026-07-28's `subscriptions/listen`): a client
 * that declares the extension asks for `notifications: { taskIds: [...] }`; the acknowledgement names
 * the ids it will hear about (its own credential's unexpired tasks, others left out), and each change of
 * such a task sends `notifications/tasks` with the task exactly as `tasks/get` shows it, starting with its
 * state now. A listen without `taskIds` stays the SDK's (streams.ts): the SDK's listen router knows no
 * `taskIds`, so a listen that names some is served here, whole: acknowledgement, subscription id on every
 * notification, `toolsListChanged` when asked for too, keep-alives, and the graceful end (the empty
 * result) when the credential stops working or the server stops, written by the host's SSE writer
 * (`openSseStream`).
 *
 * Changes are found without a replica's memory: a proposal decided anywhere reaches this replica as a
 * `proposals` event (the host's watch), and a running call's result, written by the replica that runs it,
 * is read by polling the stream's own unfinished tasks (`POLL_MS`, one query).
 */
const POLL_MS = 2_000;
const KEEP_ALIVE_MS = 15_000;
/** More task ids than a client could be following at once is a bad request, not a bigger query. */
const MAX_TASK_IDS = 64;
const SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId";
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

interface ListenMessage {
  id?: string | number;
  params?: { notifications?: { taskIds?: unknown; toolsListChanged?: unknown }; _meta?: Record<string, unknown> };
}

/** Whether a `subscriptions/listen` body asks for task notifications (then it is served here). */
export function wantsTaskNotifications(body: unknown): boolean {
  const message = body as ListenMessage | null;
  return typeof message === "object" && message !== null && message.params?.notifications?.taskIds !== undefined;
}

export interface TaskListen {
  request: FastifyRequest;
  reply: FastifyReply;
  caller: McpCaller;
  lease: StreamLease;
  tasks: McpTasks;
  devicesURL: string;
  recheckIntervalMs: number;
  openStreams: Set<() => void>;
}

function rpcError(reply: FastifyReply, lease: StreamLease, id: unknown, error: Record<string, unknown>): FastifyReply {
  lease.release();
  return reply
    .code(200)
    .header("content-type", "application/json")
    .send({ jsonrpc: "2.0", id: id ?? null, error });
}

export async function serveTaskListen(fastify: FastifyInstance, listen: TaskListen): Promise<FastifyReply> {
  const { request, reply, caller, lease, tasks } = listen;
  const message = request.body as ListenMessage;
  const id = message.id;
  const filter = message.params?.notifications ?? {};
  const capabilities = message.params?._meta?.["io.modelcontextprotocol/clientCapabilities"] as { extensions?: Record<string, unknown> } | undefined;
  if (typeof capabilities?.extensions?.[TASKS_EXTENSION] !== "object")
    return rpcError(reply, lease, id, {
      code: -32021,
      message: "Missing required client capability",
      data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
    });
  const asked = filter.taskIds;
  if (typeof id !== "string" && typeof id !== "number") return rpcError(reply, lease, id, { code: -32600, message: "subscriptions/listen needs a request id" });
  if (!Array.isArray(asked) || asked.length > MAX_TASK_IDS || !asked.every((taskId) => typeof taskId === "string"))
    return rpcError(reply, lease, id, { code: -32602, message: `Invalid params: taskIds must be at most ${MAX_TASK_IDS} task ids` });

  const context: TaskViewContext = { host: fastify.tetherHost, caller, devicesURL: listen.devicesURL };
  const following = new Set((await tasks.findOwn(caller, asked)).map((row) => row.id));
  const honored = { ...(filter.toolsListChanged === true ? { toolsListChanged: true } : {}), ...(following.size > 0 ? { taskIds: [...following] } : {}) };

  // The project's one SSE writer: keep-alives, no idle timeout, frames batched per turn, a reader that stops
  // reading cut off; a frame after the stream ended writes nothing.
  reply.hijack();
  // The content type as the SDK's own listen streams send it, without a charset.
  const stream = openSseStream(reply.raw, KEEP_ALIVE_MS, { "content-type": "text/event-stream" });
  const frame = (payload: Record<string, unknown>) => stream.send("message", { jsonrpc: "2.0", ...payload });
  const notify = (method: string, params: Record<string, unknown>) => frame({ method, params: { ...params, _meta: { [SUBSCRIPTION_ID]: id } } });
  notify("notifications/subscriptions/acknowledged", { notifications: honored });

  const end = () => {
    frame({ id, result: { resultType: "complete", _meta: { [SUBSCRIPTION_ID]: id, "io.modelcontextprotocol/serverInfo": SERVER_INFO } } });
    stream.end();
  };
  if (Object.keys(honored).length === 0) {
    end();
    lease.release();
    return reply;
  }
  const followed = followTasks(fastify, context, tasks, following, (view) => notify("notifications/tasks", { ...view }));
  const close = watchStream(fastify, {
    caller,
    recheckIntervalMs: listen.recheckIntervalMs,
    onToolsChanged: () => void (honored.toolsListChanged && notify("notifications/tools/list_changed", {})),
    end,
  });
  listen.openStreams.add(close);
  // Whoever ended it: the client, the credential, the server stopping.
  void stream.ended.then(() => {
    listen.openStreams.delete(close);
    followed();
    close();
    lease.release();
  });
  return reply;
}

/**
 * Sends each followed task's state now and whenever it changes, until it ends; returns the stop. One
 * refresh at a time: a refresh asked for while one runs runs once after it.
 */
function followTasks(fastify: FastifyInstance, context: TaskViewContext, tasks: McpTasks, following: Set<string>, send: (view: TaskView) => void): () => void {
  const sent = new Map<string, string>();
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  const refresh = async () => {
    for (const row of await tasks.findOwn(context.caller, [...following])) {
      const view = await detailedTask(context, row).catch(() => undefined);
      if (!view || stopped) continue;
      const seen = JSON.stringify(view);
      if (sent.get(row.id) !== seen) {
        sent.set(row.id, seen);
        send(view);
      }
      if (TERMINAL.has(view.status)) following.delete(row.id);
    }
  };
  const schedule = () => {
    if (stopped || following.size === 0) return;
    if (running) {
      again = true;
      return;
    }
    running = refresh()
      .catch((error: unknown) => fastify.log.warn({ err: error }, "mcp: task notification refresh failed"))
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          schedule();
        }
      });
  };
  schedule();
  const timer = setInterval(schedule, POLL_MS);
  timer.unref();
  const unwatch = fastify.tetherHost.watch(context.caller.userId, (topic) => topic === "proposals" && schedule());
  return () => {
    stopped = true;
    clearInterval(timer);
    unwatch();
  };
}
