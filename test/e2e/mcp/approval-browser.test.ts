import { readFile } from "node:fs/promises";
import path from "node:path";
import { UrlElicitationRequiredError, type Client } from "@modelcontextprotocol/client";
import t from "tap";
import { chromiumAvailable, launchChromium } from "../browser/support.js";
import { builtExecutable } from "../../host/executable.js";
import { eventually } from "../../helpers/eventually.js";
import { mcpWorld } from "../../mcp/helpers.js";
import { connectV2, rawWriteFileCall } from "../../mcp/v2.js";
import { ownerDecides } from "./owner-decides.js";

/** The URL elicitation a 2025-11-25 write_file call answers with (-32042); throws if it answers anything else. */
async function urlElicitationOf(client: Client, args: Record<string, unknown>): Promise<{ mode: string; url: string; elicitationId: string }> {
  const error = await client.callTool({ name: "write_file", arguments: args }).then(
    (result) => new Error(`expected -32042, got ${JSON.stringify(result.structuredContent)}`),
    (error: unknown) => error,
  );
  if (!(error instanceof UrlElicitationRequiredError)) throw error;
  return error.elicitations[0] as { mode: string; url: string; elicitationId: string };
}

/**
 * Approval inside one tool call, end to end: the official SDK v2 client calls a mutate tool at
 * 2026-07-28 and gets input_required with the proposal's URL; the owner, signed in to Tether in
 * Chromium, opens it and presses Approve; the client's retry gets the applied result, and the real
 * device's disk changed. A forged requestState is refused. At 2025-11-25 the same client, declaring URL
 * elicitation in initialize, gets that revision's form of it: the JSON-RPC error -32042 with the proposal's
 * page (the SDK's UrlElicitationRequiredError); the owner decides there in Chromium, the client's
 * notification stream says so (`notifications/elicitation/complete`), and its retry of the same call gets the
 * applied result or the refusal.
 */
if (!chromiumAvailable(t)) process.exit(0);

const executable = await builtExecutable(t);
const world = await mcpWorld(t, executable, "approval-box");
const browser = await launchChromium(t);

t.test("the owner approves in Chromium at the URL the client was given; the retry gets the applied result", async (t) => {
  const client = await connectV2(t, world.url, world.token, "2026-07-28", { elicitation: { url: {} } });
  const opened: string[] = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    const { url } = request.params as { url: string };
    opened.push(url);
    // What a client does with a URL elicitation: show it to its user, who decides in the browser.
    t.match(await ownerDecides(browser, world, url, "Approve"), /notes\.txt/, "the proposal's page shows the change");
    return { action: "accept" };
  });
  const result = await client.callTool({ name: "write_file", arguments: { device: "approval-box", path: "notes.txt", content: "approved by the owner\n" } });
  t.equal(opened.length, 1, "one URL elicitation");
  t.match(opened[0], new RegExp(`^${world.url}/devices/proposals/`));
  t.notOk(result.isError);
  t.match(result.structuredContent, { status: "applied" });
  t.equal(await readFile(path.join(world.root, "notes.txt"), "utf8"), "approved by the owner\n", "the device's disk changed, after the approval");
});

t.test("a forged requestState is refused before the tool runs", async (t) => {
  const body = (await rawWriteFileCall(
    world.url,
    world.token,
    { device: "approval-box", path: "notes.txt", content: "forged\n" },
    { requestState: "eyJ1IjoieCJ9.forged" },
  )) as {
    error?: { code: number };
  };
  t.equal(body.error?.code, -32602);
  t.equal(await readFile(path.join(world.root, "notes.txt"), "utf8"), "approved by the owner\n", "nothing changed");
});

t.test("at 2025-11-25 the client gets -32042 with the proposal's page; the owner approves there in Chromium; the retry gets the applied result", async (t) => {
  const client = await connectV2(t, world.url, world.token, "2025-11-25", { elicitation: { url: {} } });
  let elicited = 0;
  client.setRequestHandler("elicitation/create", async () => (elicited++, { action: "accept" }));
  const completed: string[] = [];
  client.setNotificationHandler("notifications/elicitation/complete", (notification) => {
    completed.push((notification.params as { elicitationId: string }).elicitationId);
  });
  const content = "approved at 2025-11-25\n";
  const args = { device: "approval-box", path: "notes.txt", content };
  const asked = await urlElicitationOf(client, args);
  t.match(asked, { mode: "url", url: new RegExp(`^${world.url}/devices/proposals/`) });
  t.equal(await readFile(path.join(world.root, "notes.txt"), "utf8"), "approved by the owner\n", "nothing changed before the owner decided");
  t.match(await ownerDecides(browser, world, asked.url, "Approve"), /notes\.txt/);
  // The client's notification stream says the owner is done, so it can retry without asking its user.
  await eventually(() => completed.includes(asked.elicitationId), 10_000, "notifications/elicitation/complete");
  const result = await client.callTool({ name: "write_file", arguments: args });
  t.notOk(result.isError);
  t.match(result.structuredContent, { proposalId: asked.elicitationId, status: "applied" });
  t.equal(elicited, 0, "no elicitation/create at 2025-11-25: the error carries the URL");
  t.equal(await readFile(path.join(world.root, "notes.txt"), "utf8"), content, "the device's disk changed, after the approval");
});

t.test("the owner rejects in Chromium: at either revision the retry is the refusal", async (t) => {
  const before = await readFile(path.join(world.root, "notes.txt"), "utf8");
  const args = { device: "approval-box", path: "notes.txt", content: "rejected by the owner\n" };
  const modern = await connectV2(t, world.url, world.token, "2026-07-28", { elicitation: { url: {} } });
  modern.setRequestHandler("elicitation/create", async (request) => {
    await ownerDecides(browser, world, (request.params as { url: string }).url, "Reject");
    return { action: "accept" };
  });
  const refused = await modern.callTool({ name: "write_file", arguments: args });
  t.equal(refused.isError, true);
  t.match(refused.structuredContent, { status: "rejected" });

  const legacy = await connectV2(t, world.url, world.token, "2025-11-25", { elicitation: { url: {} } });
  const asked = await urlElicitationOf(legacy, args);
  await ownerDecides(browser, world, asked.url, "Reject");
  const retried = await legacy.callTool({ name: "write_file", arguments: args });
  t.equal(retried.isError, true);
  t.match(retried.structuredContent, { proposalId: asked.elicitationId, status: "rejected" });
  t.equal(await readFile(path.join(world.root, "notes.txt"), "utf8"), before, "nothing changed");
});
