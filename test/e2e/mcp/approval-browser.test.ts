import { readFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { chromiumAvailable, launchChromium, pageSignedIn } from "../browser/support.js";
import { builtExecutable } from "../../host/executable.js";
import { mcpWorld } from "../../mcp/helpers.js";
import { connectV2, rawWriteFileCall } from "../../mcp/v2.js";

/**
 * Approval inside one tool call, end to end: the official SDK v2 client calls a mutate tool at
 * 2026-07-28 and gets input_required with the proposal's URL; the owner, signed in to Tether in
 * Chromium, opens it and presses Approve; the client's retry gets the applied result, and the real
 * device's disk changed. A forged requestState is refused.
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
    const page = await pageSignedIn(browser, world.url, world.owner.cookies);
    await page.goto(url);
    t.match(await page.textContent("main"), /notes\.txt/, "the proposal's page shows the change");
    await page.click("button:has-text('Approve')");
    await page.waitForLoadState();
    await page.close();
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
