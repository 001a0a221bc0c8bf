import {
  createApplicationInputHandler,
  createTaskSessionFromClient,
  resultFromTaskOutcome,
  type ApplicationInputCallbacks,
} from "@modelcontextprotocol/ext-tasks/client";
import t, { type Test } from "tap";
import { connectedDevice, startHostServer } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { connectV2, dispatchFramed, envelope, rawModern } from "./v2.js";

/**
 * A client that declares both the tasks extension and URL-mode elicitation calls a mutate tool: the
 * task is `input_required`, its input request the URL of the proposal's page; the client shows it and
 * answers with `tasks/update`; the owner decides on Tether's page, signed in; the task completes with
 * the applied result or the refusal. Driven by the official SDK v2 client and the official tasks client.
 */
const app = await startHostServer(t);
const { url } = app;
const { owner, deviceId, device } = await connectedDevice(t, url, "box");
device.serve(async (call) => {
  if (call.mode === "plan") return { diff: "", summary: `Write ${call.input.path}` };
  return { written: call.input.path };
});
const token = await mintToken(owner, { name: "agent", scopes: ["host:call"] });
const CAPABILITIES = { elicitation: { url: {} }, extensions: { "io.modelcontextprotocol/tasks": {} } };

/** A write_file call from a raw 2026-07-28 client declaring `capabilities`: the task it answers with. */
async function writeTask(path: string, content: string, capabilities: Record<string, unknown> = CAPABILITIES): Promise<any> {
  const response = await rawModern(url, token, "tools/call", {
    name: "write_file",
    arguments: { device: deviceId, path, content },
    _meta: envelope(capabilities),
  });
  return (await readJson(response)).result;
}

/** The official SDK v2 client and the tasks client over it, declaring URL elicitation; `elicitation` answers the task's input. */
async function taskSession(t: Test, elicitation: ApplicationInputCallbacks["elicitation"]) {
  const unexpected = (kind: string) => () => {
    throw new Error(`Tether asked for ${kind}`);
  };
  const onInputRequest = createApplicationInputHandler({ elicitation, sampling: unexpected("sampling"), roots: unexpected("roots") });
  const client = await connectV2(t, url, token, "2026-07-28", { elicitation: { url: {} } });
  const session = createTaskSessionFromClient(client, {
    endpointId: "tether",
    rawDispatch: (request, options) => dispatchFramed(url, token, request as Record<string, any>, options?.signal),
    v2RequestFraming: {
      protocolVersion: "2026-07-28",
      clientInfo: { name: "tether-test-v2", version: "1.0.0" },
      clientCapabilities: { elicitation: { url: {} } },
    },
    onInputRequest,
    onError: (error) => t.fail(`the tasks client reported: ${String(error)}`),
  });
  t.teardown(() => session.close());
  return session;
}

async function rawTask(bearer: string, method: string, taskId: string, params: Record<string, unknown> = {}): Promise<any> {
  return readJson(
    await rawModern(
      url,
      bearer,
      method,
      { taskId, ...params, _meta: envelope(CAPABILITIES) },
      { "mcp-protocol-version": "2026-07-28", "mcp-method": method, "mcp-name": taskId },
    ),
  );
}

/** The owner, signed in to Tether, opens the page the elicitation names and presses Approve or Reject on it. */
async function ownerDecides(t: Test, pageURL: string, decision: "approve" | "reject") {
  t.ok(pageURL.startsWith(`${url}/devices/proposals/`), "the URL is the proposal's own page on Tether");
  const path = pageURL.slice(url.length);
  const page = await owner.get(path);
  t.equal(page.status, 200);
  t.match(await page.text(), new RegExp(`action="${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/${decision}"`));
  const decided = await owner.request("POST", `${path}/${decision}`, { form: {} });
  t.equal(decided.status, 303, "the form answers with the page again, saying what happened");
}

t.test("input_required with the approval URL; the client answers, the owner approves on Tether, the task completes applied", async (t) => {
  const seen: Array<{ taskId?: string; params: any }> = [];
  const session = await taskSession(t, async (request, context) => {
    const params = request.params as Record<string, any>;
    seen.push({ params, ...(context.scope === "task" ? { taskId: context.taskId } : {}) });
    // While the client holds the request, the task still asks for it, on any tasks/get.
    const asking = (await rawTask(token, "tasks/get", String(context.taskId))).result;
    t.match(asking, { status: "input_required", inputRequests: { approval: { method: "elicitation/create", params: { mode: "url", url: params.url } } } });
    await ownerDecides(t, params.url, "approve");
    return { action: "accept" };
  });
  const execution = await session.callTool("write_file", { device: deviceId, path: "a.txt", content: "x" });
  t.equal(execution.kind, "task");
  const taskId = execution.handle!.taskId;
  const result = resultFromTaskOutcome((await execution.settle()).outcome) as any;
  t.equal(seen.length, 1, "the client was asked once");
  t.equal(seen[0]!.taskId, taskId, "as the task's input");
  t.match(seen[0]!.params, { mode: "url", message: /approve or reject/ });
  t.notOk(result.isError);
  t.match(result.structuredContent, { status: "applied", result: /"written": "a.txt"/ });
  t.match((await rawTask(token, "tasks/get", taskId)).result, { status: "completed", result: { structuredContent: { status: "applied" } } });
});

t.test("the seed and the poll: input_required until the client answers, then working (the key is never asked again) until the owner rejects", async (t) => {
  const created = await writeTask("b.txt", "y");
  t.match(created, { resultType: "task", status: "input_required", pollIntervalMs: 5000 });
  t.notOk(created.inputRequests, "a CreateTaskResult is a Task: the requests come with tasks/get");
  const asking = (await rawTask(token, "tasks/get", created.taskId)).result;
  t.match(asking, { resultType: "complete", status: "input_required", inputRequests: { approval: { params: { mode: "url" } } } });
  // Another token of the same owner cannot answer for it: the task is not found.
  const other = await mintToken(owner, { name: "other", scopes: ["host:call"] });
  t.match((await rawTask(other, "tasks/update", created.taskId, { inputResponses: { approval: { action: "accept" } } })).error, { code: -32602 });
  t.equal((await rawTask(token, "tasks/get", created.taskId)).result.status, "input_required");
  // An unknown key is ignored; the real key's answer, even a decline, decides nothing.
  t.match((await rawTask(token, "tasks/update", created.taskId, { inputResponses: { other: { action: "accept" } } })).result, { resultType: "complete" });
  t.equal((await rawTask(token, "tasks/get", created.taskId)).result.status, "input_required");
  t.match((await rawTask(token, "tasks/update", created.taskId, { inputResponses: { approval: { action: "decline" } } })).result, { resultType: "complete" });
  const waiting = (await rawTask(token, "tasks/get", created.taskId)).result;
  t.match(waiting, { status: "working", statusMessage: /waiting for the owner/ });
  t.notOk(waiting.inputRequests);
  await ownerDecides(t, asking.inputRequests.approval.params.url, "reject");
  t.match((await rawTask(token, "tasks/get", created.taskId)).result, {
    status: "completed",
    result: { resultType: "complete", isError: true, structuredContent: { status: "rejected" } },
  });
});

t.test("the owner decides before the client answers: the task completes, and asks nothing more", async (t) => {
  const created = await writeTask("c.txt", "z");
  const asking = (await rawTask(token, "tasks/get", created.taskId)).result;
  await ownerDecides(t, asking.inputRequests.approval.params.url, "approve");
  const done = (await rawTask(token, "tasks/get", created.taskId)).result;
  t.match(done, { status: "completed", result: { structuredContent: { status: "applied" } } });
  t.notOk(done.inputRequests);
});

t.test("a client with tasks but without URL elicitation: the task is working, its status message names the page", async (t) => {
  const created = await writeTask("d.txt", "w", { extensions: { "io.modelcontextprotocol/tasks": {} } });
  t.match(created, { status: "working", statusMessage: /\/devices\/proposals\// });
  const polled = (await rawTask(token, "tasks/get", created.taskId)).result;
  t.match(polled, { status: "working" });
  t.notOk(polled.inputRequests);
});
