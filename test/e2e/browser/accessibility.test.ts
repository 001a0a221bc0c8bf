/**
 * axe-core on every page, in Chromium, with JavaScript on and off: no serious or critical violation
 * (issue 26). Signed out (sign-in, sign-up, password reset, the signed-out page, an error page), then signed
 * in as a site admin with a device online, a tool result and a pending change (home, devices, a tool's form
 * and result, a proposal, device approval, settings, admin). The journey test audits the pages along the way
 * too. First, axe is shown to find what it must: a test that cannot fail proves nothing.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Page } from "playwright-core";
import t from "tap";
import { makeSiteAdmin, PASSWORD } from "../../helpers/auth.js";
import { TestClient, uniqueEmail } from "../../helpers/client.js";
import { eventually } from "../../helpers/eventually.js";
import { runDevice, startHostServer } from "../../host/helpers.js";
import { Accessibility, chromiumAvailable, launchChromium, screenshot, watchDocuments } from "./support.js";

const SIGNED_OUT = ["/login", "/signup", "/forgot-password", "/reset-password?token=not-a-token", "/device", "/no-such-page"];

if (chromiumAvailable(t)) {
  // Three subtests, said up front: with a teardown registered, tap ends an idle root test on its own, and the root is
  // idle whenever the first subtest has finished while the set-up below (a device coming online) still runs; it
  // then tore the server down under that set-up ("fetch failed") or refused the later subtests.
  t.plan(3);
  const server = await startHostServer(t);
  const browser = await launchChromium(t);
  const audit = await Accessibility.open(browser, t);
  const fixtureAudit = await Accessibility.open(browser, t);

  t.test("axe reports a page's serious violations, with JavaScript on and off", async (t) => {
    for (const javaScript of [true, false]) {
      const context = await browser.newContext({ javaScriptEnabled: javaScript });
      t.teardown(() => context.close());
      const page = await context.newPage();
      watchDocuments(page);
      await page.route(`${server.url}/broken-fixture`, (route) =>
        route.fulfill({ contentType: "text/html", body: '<!doctype html><html><body><main><img src="/x.png"><button></button></main></body></html>' }),
      );
      await page.goto(`${server.url}/broken-fixture`);
      const found = await fixtureAudit.serious(page, javaScript);
      t.match(found.join("\n"), /html-has-lang[\s\S]*image-alt|image-alt[\s\S]*html-has-lang/, `JavaScript ${javaScript ? "on" : "off"}: found`);
      t.match(found.join("\n"), /button-name/);
    }
  });

  // What the signed-in pages show: a device online with a file, and a change waiting.
  const work = await mkdtemp(path.join(os.tmpdir(), "tether-a11y-"));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  await writeFile(path.join(work, "notes.txt"), "Shopping list\n- milk\n- bread\n");
  const email = uniqueEmail("a11y");
  const owner = new TestClient(server.url);
  const ownerId = await owner.signUp(email, PASSWORD, "Ada Audit");
  await makeSiteAdmin(server.app, ownerId);
  const code = ((await (await owner.post("/api/host/pairing-codes")).json()) as { code: string }).code;
  runDevice(t, { server: server.url, root: work, configDir: path.join(work, ".config"), pairingCode: code, name: "audit-laptop" });
  let deviceId = "";
  await eventually(
    async () => {
      const { devices } = (await (await owner.get("/api/host/devices")).json()) as { devices: { id: string; online: boolean }[] };
      deviceId = devices[0]?.id ?? "";
      return devices[0]?.online === true;
    },
    15_000,
    "the device online",
  );
  const proposed = await owner.post("/api/host/calls", {
    deviceId,
    tool: "edit_file",
    input: { path: "notes.txt", edits: [{ find: "- bread", replace: "- sourdough bread" }] },
  });
  const proposalId = ((await proposed.json()) as { proposalId: string }).proposalId;

  const SIGNED_IN = [
    "/home",
    "/devices",
    `/devices/${deviceId}/tools/read_file?arg.path=notes.txt`,
    `/devices/${deviceId}/tools/list_directory?arg.path=.`,
    `/devices/${deviceId}/tools/grep?arg.pattern=milk&arg.context=1`,
    `/devices/${deviceId}/tools/stat?arg.path=notes.txt`,
    `/devices/${deviceId}/tools/edit_file`,
    `/devices/${deviceId}/revoke`,
    `/devices/proposals/${proposalId}`,
    "/device?user_code=WRONG-CODE",
    "/settings/tokens",
    "/settings/security",
    "/settings/sessions",
    "/settings/activity",
    "/settings/mcp",
    "/admin/users",
    `/admin/users/${ownerId}`,
    "/admin/activity",
  ];

  t.teardown(() => {
    // Below the bar the issue sets, for whoever improves the pages next.
    for (const rule of audit.lesser) console.log(`# axe, not failed on: ${rule}`);
  });
  for (const javaScript of [true, false]) {
    t.test(`every page, JavaScript ${javaScript ? "on" : "off"}`, async (t) => {
      const context = await browser.newContext({ baseURL: server.url, javaScriptEnabled: javaScript, viewport: { width: 1200, height: 900 } });
      t.teardown(() => context.close());
      const page = await context.newPage();
      watchDocuments(page);
      const visit = async (address: string, expected: number) => {
        const response = await page.goto(address);
        // A refused code is the form again with its message: a 4xx page, still a page to audit.
        if (address.includes("WRONG-CODE")) t.ok((response?.status() ?? 0) >= 400 && (response?.status() ?? 0) < 500, `${address}: 4xx`);
        else t.equal(response?.status(), expected, `${address}: ${expected}`);
        t.strictSame(await audit.serious(page, javaScript), [], `${address}: no serious or critical violation`);
      };
      for (const address of SIGNED_OUT) await visit(address, address === "/no-such-page" ? 404 : 200);
      await signIn(page, email);
      for (const address of SIGNED_IN) await visit(address, 200);
      if (javaScript) await screenshot(page, "accessibility-admin-activity");
      // Signing out says so: that page too.
      await page.goto("/home");
      await page.getByRole("button", { name: "Sign out" }).click();
      await page.waitForURL((url) => !url.pathname.startsWith("/home"));
      t.strictSame(await audit.serious(page, javaScript), [], `${new URL(page.url()).pathname} after signing out: no serious or critical violation`);
    });
  }
}

async function signIn(page: Page, email: string): Promise<void> {
  await page.goto("/login");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.waitForURL("**/home");
}
