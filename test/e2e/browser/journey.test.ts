/**
 * The whole journey of issue #26, as a new user walks it, with JavaScript on and then off: the server
 * started as `npm start` starts it from a fresh data directory; open the address it printed, sign up,
 * take the command /devices offers and run it in a shell (it downloads the real tether-host the server
 * built in the background, checks its SHA-256 and starts it), approve the device, run list_directory and
 * open a folder, read a file, propose an edit_file through the repeatable fields and approve it on its
 * page (proposer and outcome shown), copy the MCP configuration. axe-core audits every page on the way;
 * screenshots go to test/artifacts/screenshots/journey-js-{on,off}-*.png.
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import t, { type Test } from "tap";
import { SERVER_PLATFORM } from "../../../src/web/install-commands.js";
import { uniqueEmail } from "../../helpers/client.js";
import { eventually } from "../../helpers/eventually.js";
import { builtExecutable } from "../../host/executable.js";
import { Accessibility, chromiumAvailable, launchChromium, screenshot, startLikeNpmStart, watchDocuments } from "./support.js";

const PASSWORD = "correct horse battery";
const NOTES = "Shopping list\n- milk\n- bread\n";

if (chromiumAvailable(t)) {
  // The executable the page offers is dist/downloads' (npm start's default), brought up to date first: the
  // server's background build runs only when there is none at all, and would leave a stale one in place after
  // a change to the device's sources (a minute or two on two cores when it builds; reused when fresh).
  t.setTimeout(900_000);
  await builtExecutable(t);
  const server = await startLikeNpmStart(t);
  const browser = await launchChromium(t);
  const audit = await Accessibility.open(browser, t);
  for (const javaScript of [true, false]) {
    await t.test(`the journey, JavaScript ${javaScript ? "on" : "off"}`, (t) => journey(t, { browser, audit, url: server.url, javaScript }));
  }
}

interface Journey {
  browser: Browser;
  audit: Accessibility;
  url: string;
  javaScript: boolean;
}

async function journey(t: Test, { browser, audit, url, javaScript }: Journey): Promise<void> {
  const context = await browser.newContext({ baseURL: url, javaScriptEnabled: javaScript, viewport: { width: 1200, height: 900 } });
  t.teardown(() => context.close());
  if (javaScript) await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: url });
  const page = await context.newPage();
  watchDocuments(page);
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`);
  });
  const label = `journey-js-${javaScript ? "on" : "off"}`;
  const seen = async (name: string) => {
    t.strictSame(await audit.serious(page, javaScript), [], `${name}: no serious or critical accessibility violation`);
  };
  /** Waits for `locator`: with JavaScript the page updates itself; without, the person reloads. */
  const until = (locator: Locator, what: string, timeoutMs = 30_000) =>
    eventually(
      async () => {
        if (await locator.first().isVisible()) return true;
        if (!javaScript) await page.reload();
        return false;
      },
      timeoutMs,
      what,
      500,
    );

  // The address npm start printed, then sign up.
  await page.goto(url);
  await page.waitForURL("**/login**");
  await seen("login");
  await page.getByRole("link", { name: "Create an account" }).click();
  await page.waitForURL("**/signup**");
  await seen("signup");
  await page.getByLabel("Name").fill("Ada Journey");
  await page.getByLabel("Email").fill(uniqueEmail(`journey-${javaScript ? "js" : "nojs"}`));
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Create account" }).click();
  await page.waitForURL("**/home");
  await page.getByRole("heading", { name: "Welcome, Ada Journey" }).waitFor();
  await seen("home, new account");

  // Removed by installDevice's teardown, after the device has stopped writing its configuration there.
  const machine = await mkdtemp(path.join(os.tmpdir(), "tether-journey-machine-"));
  await mkdir(path.join(machine, "project"));
  await writeFile(path.join(machine, "project", "notes.txt"), NOTES);
  const deviceName = `journey-${javaScript ? "js" : "nojs"}`;
  await installDevice(t, { page, url, machine, deviceName, until, seen });

  await runTools(t, { page, deviceName, seen, label });
  await proposeAndApprove(t, { page, machine, deviceName, javaScript, until, seen, label });

  await page.getByRole("navigation").getByRole("link", { name: "Home" }).click();
  await page.waitForURL("**/home");
  await page.locator("#home-devices-heading").waitFor();
  t.match(await page.locator("main").textContent(), deviceName, "home shows the device");
  await seen("home with a device");
  await screenshot(page, `${label}-home`);

  await copyMcpConfiguration(t, { page, url, javaScript, seen, label });
  t.strictSame(problems, [], "no script errors or CSP violations");
}

type Seen = (name: string) => Promise<void>;
type Until = (locator: Locator, what: string, timeoutMs?: number) => Promise<void>;

/** /devices offers a command; a shell runs it as pasted; the device asks for approval at /device. */
async function installDevice(t: Test, o: { page: Page; url: string; machine: string; deviceName: string; until: Until; seen: Seen }): Promise<void> {
  const { page } = o;
  await page.getByRole("navigation").getByRole("link", { name: "Devices" }).click();
  await page.waitForURL("**/devices");
  const block = page.locator(`#install-command-${SERVER_PLATFORM}`);
  // Built in the background at start ("Preparing tether-host…" meanwhile): the card offers it when ready.
  await o.until(block, "the download card's command (tether-host built in the background)", 480_000);
  await o.seen("devices, nothing paired");
  const command = await block.inputValue();
  t.match(command, `${o.url}/downloads/tether-host-${SERVER_PLATFORM}`, "the command downloads from the printed address");

  // The person's shell: their own HOME, and the device named so the two runs are told apart.
  const shell = spawn("sh", ["-c", command], {
    cwd: o.machine,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: o.machine, TETHER_DEVICE_NAME: o.deviceName },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // its own process group: sh and the tether-host it started are ended together, by that id
  });
  const output: string[] = [];
  for (const stream of [shell.stdout, shell.stderr]) stream.setEncoding("utf8").on("data", (chunk: string) => output.push(...chunk.split("\n")));
  const exited = new Promise<number | null>((resolve) => shell.once("exit", (code) => resolve(code)));
  t.teardown(async () => {
    if (shell.exitCode === null && shell.pid !== undefined) process.kill(-shell.pid, "SIGTERM");
    await exited;
    // sh may end before the tether-host it started: wait until nothing of the group is left.
    const groupGone = () => {
      try {
        process.kill(-shell.pid!, 0);
        return false;
      } catch {
        return true;
      }
    };
    if (shell.pid !== undefined) await eventually(groupGone, 15_000, "tether-host stopped");
    await rm(o.machine, { recursive: true, force: true });
  });
  let approval: string | undefined;
  await eventually(
    () => (approval = output.map((line) => /(https?:\/\/\S+\/device\?user_code=\S+)/.exec(line)?.[1]).find(Boolean)) !== undefined,
    120_000,
    () => `tether-host's approval address (output: ${output.join(" | ")}; exit ${shell.exitCode})`,
  );
  t.match(output.join("\n"), /OK/, "sha256sum checked the download");

  await page.goto(approval!);
  await page.getByRole("heading", { name: "Is this your device?" }).waitFor();
  await o.seen("device approval");
  await page.getByRole("button", { name: "Approve" }).click();
  await page.getByRole("heading", { name: "Device approved" }).waitFor();
  await o.seen("device approved");

  await page.getByRole("link", { name: "your devices" }).click();
  await page.waitForURL("**/devices");
  const device = page.locator(".device", { hasText: o.deviceName });
  await o.until(device.getByText("Online"), "the device online", 30_000);
}

/** list_directory, a folder opened from the listing, a file opened from the folder's listing. */
async function runTools(t: Test, o: { page: Page; deviceName: string; seen: Seen; label: string }): Promise<void> {
  const { page } = o;
  const device = page.locator(".device", { hasText: o.deviceName });
  await device.getByRole("link", { name: "list_directory", exact: true }).click();
  await page.getByRole("heading", { name: `list_directory on ${o.deviceName}` }).waitFor();
  await page.getByRole("button", { name: "Run" }).click();
  const folder = page.getByRole("table", { name: /^Entries of / }).getByRole("link", { name: "project/" });
  await folder.waitFor();
  await o.seen("devices, a listing");
  await folder.click();
  const file = page.getByRole("table", { name: /^Entries of .*project$/ }).getByRole("link", { name: "notes.txt" });
  await file.waitFor();
  await file.click();
  const lines = page.getByLabel(/^Lines of .*notes\.txt$/);
  await lines.waitFor();
  // One line each (a line number, then the text): Eta had once swallowed the newlines, leaving one long line.
  t.equal(await lines.textContent(), "1Shopping list\n2- milk\n3- bread\n", "the file, one numbered line per line");
  await o.seen("devices, a file");
}

/** edit_file with two edits (the second group added by "Add another edit"), approved on its own page. */
async function proposeAndApprove(
  t: Test,
  o: { page: Page; machine: string; deviceName: string; javaScript: boolean; until: Until; seen: Seen; label: string },
): Promise<void> {
  const { page } = o;
  const device = page.locator(".device", { hasText: o.deviceName });
  await device.getByRole("link", { name: "edit_file", exact: true }).click();
  await page.getByRole("heading", { name: `edit_file on ${o.deviceName}` }).waitFor();
  await page.getByLabel("Path").fill("project/notes.txt");
  await page.getByRole("group", { name: "Edit 1" }).getByLabel("Find").fill("- bread");
  await page.getByRole("group", { name: "Edit 1" }).getByLabel("Replace").fill("- sourdough bread");
  await page.getByRole("button", { name: "Add another edit" }).click();
  const second = page.getByRole("group", { name: "Edit 2" });
  await second.waitFor();
  t.equal(await page.getByLabel("Path").inputValue(), "project/notes.txt", "adding a group keeps what was typed");
  t.equal(await page.getByRole("group", { name: "Edit 1" }).getByLabel("Find").inputValue(), "- bread");
  await second.getByLabel("Find").fill("- milk");
  await second.getByLabel("Replace").fill("- oat milk");
  await o.seen("devices, edit_file with two edits");
  await page.getByRole("button", { name: "Propose change" }).click();
  await page
    .getByRole("status")
    .filter({ hasText: /^Proposed: / })
    .waitFor();
  await o.until(page.locator("#proposals-panel .proposal"), "the change under Pending changes");
  t.equal(await readFile(path.join(o.machine, "project", "notes.txt"), "utf8"), NOTES, "nothing changed yet");

  // /devices with a result and a pending change, for the eye.
  await device.getByRole("link", { name: "read_file", exact: true }).click();
  // With JavaScript the form arrives by htmx: typing before it has replaced edit_file's panel types into the old one.
  await page.getByRole("heading", { name: `read_file on ${o.deviceName}` }).waitFor();
  await page.getByLabel("Path").fill("project/notes.txt");
  await page.getByRole("button", { name: "Run" }).click();
  await page.getByLabel(/^Lines of .*notes\.txt$/).waitFor();
  await o.seen("devices, a result and a pending change");
  await screenshot(page, `${o.label}-devices`);

  await page.locator("#proposals-panel .proposal").first().getByRole("heading").getByRole("link").click();
  await page.waitForURL("**/devices/proposals/**");
  const facts = page.locator("dl.details");
  t.match(await facts.textContent(), /Proposed by\s*[\s\S]*(browser|you|Ada Journey)/i, "the proposer is named");
  t.match(await facts.textContent(), o.deviceName, "and the device");
  // The diff is laid out a line per line, coloured (the page once lacked devices.css: one long run of text).
  const diffLines = page.locator("pre.diff .diff-line");
  t.equal(await diffLines.count(), 8, "headers, hunk, context, two removed, two added");
  const [top, next] = await Promise.all([diffLines.nth(4).boundingBox(), diffLines.nth(5).boundingBox()]);
  t.ok(top && next && next.y >= top.y + top.height, "each diff line on a line of its own");
  const colour = (selector: string) =>
    page
      .locator(selector)
      .first()
      .evaluate((element) => getComputedStyle(element).backgroundColor);
  if (o.javaScript) t.not(await colour("pre.diff ins.diff-added"), await colour("pre.diff .diff-context"), "added lines coloured");
  await o.seen("proposal, pending");
  await screenshot(page, `${o.label}-proposal`);
  await page.getByRole("button", { name: /^Approve/ }).click();
  await page
    .getByText(/Applied: 2 replacements in .*notes\.txt/)
    .first()
    .waitFor({ timeout: 20_000 });
  t.match(await facts.textContent(), /Approved by/, "who decided");
  t.equal(
    await readFile(path.join(o.machine, "project", "notes.txt"), "utf8"),
    "Shopping list\n- oat milk\n- sourdough bread\n",
    "the file changed on the device",
  );
  await o.seen("proposal, applied");
  await screenshot(page, `${o.label}-proposal-applied`);
}

/** /settings/mcp: with JavaScript the Copy button puts the configuration on the clipboard; without, the text is there to select. */
async function copyMcpConfiguration(t: Test, o: { page: Page; url: string; javaScript: boolean; seen: Seen; label: string }): Promise<void> {
  const { page } = o;
  await page.goto("/settings/mcp");
  const first = page.locator(".command-block textarea").first();
  const text = await first.inputValue();
  t.match(text, `${o.url}/mcp`, "the configuration names this server's MCP address");
  if (o.javaScript) {
    await page.locator(".command-block").first().getByRole("button", { name: "Copy" }).click();
    t.equal(await page.evaluate(() => navigator.clipboard.readText()), text, "Copy put it on the clipboard");
  } else {
    t.notOk(await page.getByRole("button", { name: "Copy" }).first().isVisible(), "no Copy button that cannot work");
    t.equal(await first.getAttribute("readonly"), "", "a read-only text to select and copy");
  }
  await o.seen("settings, MCP");
  await screenshot(page, `${o.label}-settings-mcp`);
}
