import { readFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { chromiumAvailable, launchChromium } from "../browser/support.js";
import { builtExecutable } from "../../host/executable.js";
import { mcpWorld } from "../../mcp/helpers.js";
import { connectV2, rawWriteFileCall } from "../../mcp/v2.js";
import { ownerDecides } from "./owner-decides.js";

/**
 * Approval inside one tool call, end to end: the official SDK v2 client calls a mutate tool at
 * 2026-07-28 and gets input_required with the proposal's URL; the owner, signed in to Tether in
 * Chromium, opens it and presses Approve; the client's retry gets the applied result, and the real
 * device's disk changed. A forged requestState is refused. At 2025-11-25 the same client, declaring URL
 * elicitation too, gets the proposal and its link instead (Tether serves that revision statelessly, so
 * it cannot send an elicitation/create mid-call; docs/mcp.md): the owner approves at that link in
 * Chromium and proposal_status reports the applied result.
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

t.test("at 2025-11-25 the client gets the proposal's link; the owner approves there in Chromium; proposal_status has the applied result", async (t) => {
  const client = await connectV2(t, world.url, world.token, "2025-11-25", { elicitation: { url: {} } });
  let elicited = 0;
  client.setRequestHandler("elicitation/create", async () => (elicited++, { action: "accept" }));
  const content = "approved at 2025-11-25\n";
  const proposed = await client.callTool({ name: "write_file", arguments: { device: "approval-box", path: "notes.txt", content } });
  const { proposalId, approveAt } = proposed.structuredContent as { proposalId: string; approveAt: string; status: string };
  t.match(proposed.structuredContent, { status: "pending", approveAt: new RegExp(`^${world.url}/devices/proposals/`) });
  t.equal(await readFile(path.join(world.root, "notes.txt"), "utf8"), "approved by the owner\n", "nothing changed before the owner decided");
  t.match(await ownerDecides(browser, world, approveAt, "Approve"), /notes\.txt/);
  const status = await client.callTool({ name: "proposal_status", arguments: { proposalId } });
  t.notOk(status.isError);
  t.match(status.structuredContent, { proposalId, status: "applied" });
  t.equal(elicited, 0, "no elicitation/create at 2025-11-25: the link is the way");
  t.equal(await readFile(path.join(world.root, "notes.txt"), "utf8"), content, "the device's disk changed, after the approval");
});

t.test("the owner rejects in Chromium: at 2026-07-28 the retry is the refusal, at 2025-11-25 proposal_status says so", async (t) => {
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
  const proposed = (await legacy.callTool({ name: "write_file", arguments: args })).structuredContent as { proposalId: string; approveAt: string };
  await ownerDecides(browser, world, proposed.approveAt, "Reject");
  const status = await legacy.callTool({ name: "proposal_status", arguments: { proposalId: proposed.proposalId } });
  t.match(status.structuredContent, { proposalId: proposed.proposalId, status: "rejected" });
  t.equal(await readFile(path.join(world.root, "notes.txt"), "utf8"), before, "nothing changed");
});
