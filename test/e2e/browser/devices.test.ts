/**
 * The /devices flow in Chromium (playwright-core, Debian's /usr/bin/chromium): pair a device from the
 * page and see it come online without a reload, run a read tool through its generated form, propose
 * an edit and approve the diff. The device is the real runtime (runHost with the built-in tools), in
 * this process. Screenshots go to test/artifacts/devices-*.png.
 */
import { existsSync, mkdirSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import t from "tap";
import { ExitCode } from "../../../src/device/host.js";
import { TestClient, uniqueEmail } from "../../helpers/client.js";
import { IN_CI } from "../../helpers/database.js";
import { runDevice, startHostServer } from "../../host/helpers.js";

const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = path.resolve(import.meta.dirname, "../../artifacts");
const PASSWORD = "correct horse battery";

if (!existsSync(CHROMIUM)) {
  const reason = `${CHROMIUM} is missing (apt-get install -y chromium)`;
  if (IN_CI) t.fail(`the /devices browser test cannot run: ${reason}`);
  else {
    console.log(`# skipping the /devices browser test: ${reason}`);
    t.plan(0, `skip: ${reason}`);
  }
} else {
  t.test("pair a device, run a read tool, approve a diff", async (t) => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const work = await mkdtemp(path.join(os.tmpdir(), "tether-browser-"));
    t.teardown(() => rm(work, { recursive: true, force: true }));
    await writeFile(path.join(work, "notes.txt"), "Shopping list\n- milk\n- bread\n");

    const server = await startHostServer(t);
    const email = uniqueEmail("browser");
    await new TestClient(server.url).signUp(email, PASSWORD, "Ada Devices");

    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic", "--no-first-run"],
    });
    t.teardown(() => browser.close());
    const context = await browser.newContext({ baseURL: server.url, viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (message.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(message.text())) {
        problems.push(`console: ${message.text()}`);
      }
    });
    const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `devices-${name}.png`), fullPage: true });

    await page.goto("/login");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL("**/home");
    await page.getByRole("link", { name: "Devices" }).first().click();
    await page.waitForURL("**/devices");
    await page.getByText("No devices yet").waitFor();
    // The live connection is open once the placeholder has been swapped for the SSE element.
    await page.locator("#devices-live[hx-sse\\:connect]").waitFor({ state: "attached" });

    // Pair: the code and how to start a machine with it appear in place (install-commands.test.ts runs the command).
    await page.getByRole("button", { name: "Pair a new device" }).click();
    const shown = page.locator(".pair-code");
    await shown.waitFor();
    const code = /([A-Z0-9]{5}-[A-Z0-9]{5})\s*$/.exec((await shown.textContent()) ?? "")?.[1];
    t.ok(code, "the code is shown");
    t.match(await page.locator("#pair-panel").textContent(), `TETHER_PAIRING_CODE=${code}`, "with the setting that uses it");
    await shot("pair");

    // The device starts with that code; the page shows it online without a reload.
    const host = runDevice(t, { server: server.url, root: work, configDir: path.join(work, "config"), pairingCode: code!, name: "ada-laptop" });
    const device = page.locator(".device", { hasText: "ada-laptop" });
    await device.getByText("Online").waitFor({ timeout: 15_000 });
    t.ok(await device.getByText(work).isVisible(), "its root is listed");

    // Run a read tool through the form generated from its schema.
    await device.getByRole("link", { name: "read_file", exact: true }).click();
    await page.getByRole("heading", { name: "read_file on ada-laptop" }).waitFor();
    await page.getByLabel("Path").fill("notes.txt");
    await page.getByRole("button", { name: "Run" }).click();
    // What a person sees: the file's lines, numbered; the raw JSON is behind the "Raw JSON" disclosure.
    const lines = page.getByLabel(/^Lines of .*notes\.txt$/);
    await lines.waitFor();
    // One line each (a line number, then the text): Eta had once swallowed the newlines, leaving one long line.
    t.equal(await lines.textContent(), "1Shopping list\n2- milk\n3- bread\n", "the file, one numbered line per line");
    const raw = page.getByLabel("Result as JSON");
    t.notOk(await raw.isVisible(), "the JSON is folded away");
    await page.getByText("Raw JSON").click();
    await raw.waitFor();
    t.match(await raw.textContent(), /Shopping list\\n- milk/, "and opens on request");
    await shot("read");

    // Propose an edit: the diff shows in the tool panel and, live, under Pending changes.
    await device.getByRole("link", { name: "edit_file", exact: true }).click();
    await page.getByRole("heading", { name: "edit_file on ada-laptop" }).waitFor();
    await page.getByLabel("Path").fill("notes.txt");
    const firstEdit = page.getByRole("group", { name: "Edit 1" });
    await firstEdit.getByLabel("Find").fill("- bread");
    await firstEdit.getByLabel("Replace").fill("- sourdough bread\n- eggs");
    await page.getByRole("button", { name: "Propose change" }).click();
    const proposal = page.locator("#proposals-panel .proposal");
    await proposal.waitFor({ timeout: 10_000 });
    t.equal(await proposal.locator("del.diff-removed").first().textContent(), "-- bread");
    t.same(await proposal.locator("ins.diff-added").allTextContents(), ["+- sourdough bread", "+- eggs"]);
    t.equal(await readFile(path.join(work, "notes.txt"), "utf8"), "Shopping list\n- milk\n- bread\n", "nothing changed yet");
    const background = (selector: string) =>
      proposal
        .locator(selector)
        .first()
        .evaluate((element) => getComputedStyle(element).backgroundColor);
    const [added, removed, plain] = await Promise.all([background("ins.diff-added"), background("del.diff-removed"), background(".diff-context")]);
    t.not(added, plain, "added lines are coloured");
    t.not(removed, plain, "removed lines are coloured");
    t.not(added, removed, "differently");
    await proposal.scrollIntoViewIfNeeded();
    await shot("proposal");

    let confirmText = "";
    page.once("dialog", (dialog) => {
      confirmText = dialog.message();
      void dialog.accept();
    });
    await proposal.getByRole("button", { name: /^Approve/ }).click();
    await page
      .getByRole("status")
      .filter({ hasText: /^Applied: / })
      .waitFor();
    t.match(confirmText, /Apply this change on “ada-laptop”\?/, "hx-confirm asked first");
    t.equal(await readFile(path.join(work, "notes.txt"), "utf8"), "Shopping list\n- milk\n- sourdough bread\n- eggs\n", "the file changed on disk");
    t.ok(await page.getByText("No changes are waiting for your approval.").isVisible());
    await shot("applied");

    // Stopping the device shows it offline, live.
    t.equal(await host.stop(), ExitCode.stopped);
    await device.getByText("Offline").waitFor({ timeout: 10_000 });
    await shot("offline");
    t.strictSame(problems, [], "no script errors or CSP violations");
  });
}
