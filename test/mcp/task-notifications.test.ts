import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";
import t, { type Test } from "tap";
import { pair, ScriptedDevice, signedIn } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";
import { TASKS, tasksWorld } from "./helpers.js";
import { connectV2, dispatchFramed, envelope, rawModern } from "./v2.js";

/**
 * Task status notifications: `subscriptions/listen` with `taskIds` (the tasks extension) sends
 * `notifications/tasks`, each the task as `tasks/get` shows it, to the official SDK v2 client, where the
 * official tasks client takes it; a proposal decided on another replica and a long call finished by
 * the replica running it both reach the stream; only the credential's own tasks are followed.
 */
const { url, other, owner, deviceId, token, releaseSlow } = await tasksWorld(t);

/**
 * The SDK v2 client declaring the extension (its listen requests carry it), connected to `at`, what it
 * hears, and the tasks client over it (whose calls go to the replica the device is connected to).
 */
async function clientWithTasks(t: Test, at = url) {
  const client = await connectV2(t, at, token, "2026-07-28", TASKS);
  const heard: any[] = [];
  client.fallbackNotificationHandler = async (notification) => void heard.push(notification);
  const session = createTaskSessionFromClient(client, {
    endpointId: "tether",
    rawDispatch: (request, options) => dispatchFramed(url, token, request as Record<string, any>, options?.signal),
    v2RequestFraming: { protocolVersion: "2026-07-28", clientInfo: { name: "tether-test-v2", version: "1.0.0" }, clientCapabilities: {} },
  });
  t.teardown(() => session.close());
  return { client, heard, session };
}

t.test("a proposal's task: its state now, then completed when the owner approves, heard on another replica", async (t) => {
  const { client, heard, session } = await clientWithTasks(t, other.url);
  const execution = await session.callTool("write_file", { device: deviceId, path: "a.txt", content: "x" });
  t.equal(execution.kind, "task");
  const taskId = execution.handle!.taskId;
  // The SDK's listen() passes taskIds through (its acknowledged filter keeps only the fields it knows).
  const subscription = await client.listen({ taskIds: [taskId] } as never);
  await eventually(() => heard.some((n) => n.method === "notifications/tasks" && n.params.status === "working"), 10_000, "the task's state now");
  const first = heard.find((n) => n.method === "notifications/tasks")!;
  t.match(first.params, { taskId, status: "working", pollIntervalMs: 5000, _meta: { "io.modelcontextprotocol/subscriptionId": /./ } });
  const proposalId = decodeURIComponent(/\/devices\/proposals\/(\S+)/.exec(first.params.statusMessage)![1]!);
  // The owner approves on the replica the device is connected to; the stream is on the other one.
  t.match(await readJson(await owner.post("/api/host/approve", { proposalId })), { status: "applied" });
  await eventually(() => heard.some((n) => n.method === "notifications/tasks" && n.params.status === "completed"), 10_000, "notifications/tasks: completed");
  const done = heard.filter((n) => n.method === "notifications/tasks").at(-1)!;
  t.match(done.params, { taskId, status: "completed", result: { resultType: "complete", structuredContent: { status: "applied" } } });
  t.notOk("resultType" in done.params, "a notification's params are the task, not a result");
  const result = resultFromTaskOutcome((await execution.settle()).outcome) as any;
  t.match(result.structuredContent, { status: "applied", result: /"written": "a.txt"/ });
  await subscription.close();
});

t.test("a long call's task: completed is heard when the call ends; tools/list_changed on the same stream", async (t) => {
  const { client, heard, session } = await clientWithTasks(t);
  const execution = await session.callTool("stat", { device: deviceId, path: "slow" });
  t.equal(execution.kind, "task");
  const subscription = await client.listen({ taskIds: [execution.handle!.taskId], toolsListChanged: true } as never);
  t.same(subscription.honoredFilter, { toolsListChanged: true });
  releaseSlow();
  await eventually(() => heard.some((n) => n.method === "notifications/tasks" && n.params.status === "completed"), 10_000, "the call's result");
  t.match(heard.filter((n) => n.method === "notifications/tasks").at(-1)!.params.result, { structuredContent: { result: /"size": 42/ } });
  // Another device of the same owner comes online.
  const paired = await pair(owner, "second");
  const second = new ScriptedDevice(url, paired.deviceId, paired.token);
  await second.hello();
  await second.connect();
  t.teardown(() => second.disconnect());
  await eventually(() => heard.some((n) => n.method === "notifications/tools/list_changed"), 10_000, "tools/list_changed");
  await subscription.close();
});

t.test("refusals: no extension declared is -32021; nobody else's task is followed", async (t) => {
  const created = (
    await readJson(
      await rawModern(url, token, "tools/call", { name: "write_file", arguments: { device: deviceId, path: "b.txt", content: "y" }, _meta: envelope(TASKS) }),
    )
  ).result;
  const undeclared = await rawModern(url, token, "subscriptions/listen", { notifications: { taskIds: [created.taskId] } });
  t.match(await undeclared.json(), { error: { code: -32021, data: { requiredCapabilities: { extensions: { "io.modelcontextprotocol/tasks": {} } } } } });
  const own = await rawModern(url, token, "subscriptions/listen", { notifications: { taskIds: [created.taskId, "not-a-task"] }, _meta: envelope(TASKS) });
  const reader = own.body!.getReader();
  const ack = new TextDecoder().decode((await reader.read()).value);
  await reader.cancel();
  t.match(ack, `"notifications":{"taskIds":["${created.taskId}"]}`, "the acknowledgement names only the credential's own task");
  const stranger = await signedIn(url);
  const strangerToken = await mintToken(stranger, { name: "other", scopes: ["host:call"] });
  const response = await rawModern(url, strangerToken, "subscriptions/listen", { notifications: { taskIds: [created.taskId] }, _meta: envelope(TASKS) });
  t.equal(response.headers.get("content-type"), "text/event-stream");
  const text = await response.text();
  t.match(text, /"notifications":\{\}/, "acknowledged with nothing followed");
  t.match(text, /"result":\{"resultType":"complete"/, "and ended at once, gracefully");
  t.notMatch(text, /notifications\/tasks/);
});
