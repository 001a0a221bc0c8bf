import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";
import t, { type Test } from "tap";
import { signedIn } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";
import { TASKS, tasksWorld } from "./helpers.js";
import { connectV2, dispatchFramed, envelope, rawModern } from "./v2.js";

/**
 * The tasks extension of MCP 2026-07-28: a long call answers with a task the client polls, on any
 * replica; a mutate tool's task waits for the owner's decision; a task is its caller's only, and ends.
 */
const { app, url, other, owner, deviceId, token, releaseSlow } = await tasksWorld(t);

/** The official SDK v2 client, with the official tasks extension's session over it (polling against `pollAt`). */
async function taskSession(t: Test, bearer: string, pollAt = url) {
  const client = await connectV2(t, url, bearer, "2026-07-28");
  t.same(client.getServerCapabilities()?.extensions?.["io.modelcontextprotocol/tasks"], {}, "server/discover declares the extension");
  const session = createTaskSessionFromClient(client, {
    endpointId: "tether",
    // The call goes where the device is connected; tasks/* go to `pollAt`.
    rawDispatch: (request, options) => {
      const method = (request as { method?: unknown }).method;
      return dispatchFramed(method === "tools/call" ? url : pollAt, bearer, request as Record<string, any>, options?.signal);
    },
    v2RequestFraming: { protocolVersion: "2026-07-28", clientInfo: { name: "tether-test-v2", version: "1.0.0" }, clientCapabilities: {} },
  });
  t.teardown(() => session.close());
  return session;
}

/** One raw tasks/* request from a client declaring the extension. */
async function rawTask(bearer: string, method: string, taskId: string, at = url): Promise<any> {
  return readJson(
    await rawModern(at, bearer, method, { taskId, _meta: envelope(TASKS) }, { "mcp-protocol-version": "2026-07-28", "mcp-method": method, "mcp-name": taskId }),
  );
}

/** A raw task-backed `stat` of "slow": its CreateTaskResult. */
async function slowTask(bearer: string): Promise<any> {
  const answer = await readJson(
    await rawModern(url, bearer, "tools/call", { name: "stat", arguments: { device: deviceId, path: "slow" }, _meta: envelope(TASKS) }),
  );
  return answer.result;
}

t.test("a long read: the call answers with a task, polled on another replica until its result", async (t) => {
  const session = await taskSession(t, token, other.url);
  const execution = await session.callTool("stat", { device: deviceId, path: "slow" });
  t.equal(execution.kind, "task", "the call outlived answerWithinMs: a task");
  const seen: string[] = [];
  const settled = execution.settle({ onEvent: (event) => void (event.type === "task" && seen.push(event.task.status)) });
  // The client polls the other replica while the device still works on it.
  const taskId = execution.handle!.taskId;
  t.match((await rawTask(token, "tasks/get", taskId, other.url)).result, { taskId, status: "working", pollIntervalMs: 2000, ttlMs: 3_600_000 });
  releaseSlow();
  const { outcome } = await settled;
  const result = resultFromTaskOutcome(outcome) as any;
  t.notOk(result.isError);
  t.match(result.structuredContent, { deviceId, tool: "stat", result: /"size": 42/ });
  t.match((await rawTask(token, "tasks/get", taskId)).result, { status: "completed", result: { resultType: "complete", structuredContent: { tool: "stat" } } });
});

t.test("a quick call from a client that declares tasks gets its result directly", async (t) => {
  const session = await taskSession(t, token);
  const execution = await session.callTool("stat", { device: deviceId, path: "quick" });
  t.equal(execution.kind, "immediate");
  t.match((resultFromTaskOutcome((await execution.settle()).outcome) as any).structuredContent, { result: /"size": 42/ });
});

t.test("a mutate tool: a task that waits for the owner, who approves it while the client polls", async (t) => {
  const session = await taskSession(t, token);
  const execution = await session.callTool("write_file", { device: deviceId, path: "a.txt", content: "x" });
  t.equal(execution.kind, "task");
  const taskId = execution.handle!.taskId;
  const waiting = (await rawTask(token, "tasks/get", taskId)).result;
  t.match(waiting, { status: "working", pollIntervalMs: 5000, statusMessage: new RegExp(`${url}/devices/proposals/`) });
  t.ok(waiting.ttlMs > 3_600_000, "kept while the proposal can still be decided, and an hour more");
  const proposalId = decodeURIComponent(/\/devices\/proposals\/(\S+)/.exec(waiting.statusMessage)![1]!);
  t.match(await readJson(await owner.post("/api/host/approve", { proposalId })), { status: "applied" });
  const result = resultFromTaskOutcome((await execution.settle()).outcome) as any;
  t.notOk(result.isError);
  t.match(result.structuredContent, { proposalId, status: "applied", result: /"written": "a.txt"/ });
});

t.test("a rejected proposal completes its task with the refusal", async (t) => {
  const created = (
    await readJson(
      await rawModern(url, token, "tools/call", { name: "write_file", arguments: { device: deviceId, path: "b.txt", content: "y" }, _meta: envelope(TASKS) }),
    )
  ).result;
  t.equal(created.resultType, "task");
  const proposalId = decodeURIComponent(/\/devices\/proposals\/(\S+)/.exec(created.statusMessage)![1]!);
  t.equal((await owner.post("/api/host/reject", { proposalId })).status, 200);
  const done = (await rawTask(token, "tasks/get", created.taskId)).result;
  t.match(done, { status: "completed", result: { isError: true, structuredContent: { status: "rejected" } } });
});

t.test("another user's or another credential's task id is not found; a client without the extension is refused", async (t) => {
  const created = await slowTask(token);
  t.match(created, { resultType: "task", status: "working", taskId: /./ });
  const stranger = await signedIn(url);
  const strangerToken = await mintToken(stranger, { name: "other", scopes: ["host:call"] });
  const sameUserOtherToken = await mintToken(owner, { name: "other", scopes: ["host:call"] });
  for (const bearer of [strangerToken, sameUserOtherToken]) {
    for (const method of ["tasks/get", "tasks/cancel", "tasks/update"]) {
      t.match((await rawTask(bearer, method, created.taskId)).error, { code: -32602, message: /Task not found/ }, method);
    }
  }
  const undeclared = await readJson(
    await rawModern(
      url,
      token,
      "tasks/get",
      { taskId: created.taskId },
      { "mcp-protocol-version": "2026-07-28", "mcp-method": "tasks/get", "mcp-name": created.taskId },
    ),
  );
  t.match(undeclared.error, { code: -32021, data: { requiredCapabilities: { extensions: { "io.modelcontextprotocol/tasks": {} } } } });
  // The owner's own credential cancels it; the device's late answer does not undo that.
  t.match((await rawTask(token, "tasks/cancel", created.taskId)).result, { resultType: "complete" });
  releaseSlow();
  t.match((await rawTask(token, "tasks/get", created.taskId)).result, { status: "cancelled" });
});

t.test("an expired task is gone", async (t) => {
  const created = await slowTask(token);
  releaseSlow();
  await eventually(async () => (await rawTask(token, "tasks/get", created.taskId)).result?.status === "completed");
  await app.database.db
    .updateTable("mcp_task")
    .set({ expires_at: new Date(Date.now() - 1000) })
    .where("id", "=", created.taskId)
    .execute();
  t.match((await rawTask(token, "tasks/get", created.taskId)).error, { code: -32602, message: /expired/ });
  // A later task's creation purges the expired row.
  const next = await slowTask(token);
  releaseSlow();
  t.notOk(await app.database.db.selectFrom("mcp_task").select("id").where("id", "=", created.taskId).executeTakeFirst());
  t.ok(next.taskId);
});

t.test("a client that does not declare tasks gets today's answers", async (t) => {
  const client = await connectV2(t, url, token, "2026-07-28");
  const result = await client.callTool({ name: "write_file", arguments: { device: deviceId, path: "c.txt", content: "z" } });
  t.match(result.structuredContent, { status: "pending", proposalId: /./ });
  const legacy = await connectV2(t, url, token, "2025-11-25");
  t.notOk((legacy.getServerCapabilities() as Record<string, unknown>)?.tasks, "2025-11-25: no tasks capability");
});

t.test("a call whose replica stopped before it finished: the task has failed, past its deadline", async (t) => {
  const created = await slowTask(token);
  // As if the replica running it had died: its deadline passes with the row still working.
  await app.database.db
    .updateTable("mcp_task")
    .set({ run_deadline: new Date(Date.now() - 1000) })
    .where("id", "=", created.taskId)
    .execute();
  t.match((await rawTask(token, "tasks/get", created.taskId)).result, { status: "failed", error: { code: -32603 }, statusMessage: /call the tool again/ });
  releaseSlow();
});

t.test("bad task requests are JSON-RPC errors, never a 500", async (t) => {
  const missing = await rawModern(url, token, "tasks/get", { _meta: envelope(TASKS) }, { "mcp-protocol-version": "2026-07-28", "mcp-method": "tasks/get" });
  t.ok(missing.status < 500, `no taskId: ${missing.status}`);
  t.match((await readJson(missing)).error, { code: -32602 });
  const numeric = await readJson(
    await rawModern(
      url,
      token,
      "tasks/get",
      { taskId: 42, _meta: envelope(TASKS) },
      { "mcp-protocol-version": "2026-07-28", "mcp-method": "tasks/get", "mcp-name": "42" },
    ),
  );
  t.match(numeric.error, { code: -32602 });
  const long = "x".repeat(5000);
  t.match((await rawTask(token, "tasks/get", long)).error, { code: -32602, message: /Task not found/ });
});
