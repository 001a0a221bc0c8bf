/**
 * The install command on /devices is read before it is run: a person must see all of it, the long SHA-256 check
 * line included, without scrolling inside the box, with JavaScript on and off, on a wide screen and a phone.
 * Measured in Chromium (with JavaScript off, playwright cannot evaluate in the page, so the same document is
 * measured as its twin: support.ts), and screenshotted to test/artifacts/screenshots/install-command-*.png.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Page } from "playwright-core";
import t from "tap";
import { TestClient, uniqueEmail } from "../../helpers/client.js";
import { startHostServer } from "../../host/helpers.js";
import { chromiumAvailable, launchChromium, screenshot, watchDocuments, withoutScripts } from "./support.js";

const PASSWORD = "correct horse battery";

interface Box {
  text: string;
  /** The page's own width: a digest elsewhere on the card must not widen it either. */
  pageWidth: number;
  viewportWidth: number;
  scrollWidth: number;
  clientWidth: number;
  scrollHeight: number;
  clientHeight: number;
}

const measure = (page: Page): Promise<Box> =>
  page.locator("#install-command-linux-x64").evaluate((field: HTMLTextAreaElement) => ({
    text: field.value,
    pageWidth: document.documentElement.scrollWidth,
    viewportWidth: document.documentElement.clientWidth,
    scrollWidth: field.scrollWidth,
    clientWidth: field.clientWidth,
    scrollHeight: field.scrollHeight,
    clientHeight: field.clientHeight,
  }));

if (chromiumAvailable(t)) {
  const downloads = await mkdtemp(path.join(os.tmpdir(), "tether-downloads-"));
  t.teardown(() => rm(downloads, { recursive: true, force: true }));
  await writeFile(path.join(downloads, "tether-host-linux-x64"), "#!/bin/sh\n");
  const server = await startHostServer(t, { env: { DOWNLOADS_DIR: downloads } });
  const email = uniqueEmail("install-command");
  await new TestClient(server.url).signUp(email, PASSWORD, "Ada Install");
  const browser = await launchChromium(t);
  const twins = await browser.newContext();
  t.teardown(() => twins.close());

  for (const javaScript of [true, false]) {
    for (const [screen, viewport] of [
      ["wide", { width: 1200, height: 900 }],
      ["phone", { width: 390, height: 844 }],
    ] as const) {
      t.test(`the whole command is visible: JavaScript ${javaScript ? "on" : "off"}, ${screen} screen`, async (t) => {
        const context = await browser.newContext({ baseURL: server.url, viewport, javaScriptEnabled: javaScript });
        t.teardown(() => context.close());
        const page = await context.newPage();
        watchDocuments(page);
        await page.goto("/login");
        await page.getByLabel("Email").fill(email);
        await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
        await page.getByRole("button", { name: "Sign in", exact: true }).click();
        await page.waitForURL(/\/home$/);
        await page.goto("/devices");
        await screenshot(page, `install-command-js-${javaScript ? "on" : "off"}-${screen}`);

        let box: Box;
        if (javaScript) box = await measure(page);
        else {
          const twin = await withoutScripts(twins, page, viewport);
          t.teardown(() => twin.close());
          box = await measure(twin);
        }
        t.match(box.text, /^echo '[0-9a-f]{64} {2}tether-host-linux-x64' \| sha256sum -c - &&$/m, "the box holds the SHA-256 check");
        t.ok(box.scrollWidth <= box.clientWidth, `no line runs past the box's edge (${box.scrollWidth} ≤ ${box.clientWidth} px)`);
        t.ok(box.scrollHeight <= box.clientHeight + 1, `no line is hidden below it (${box.scrollHeight} ≤ ${box.clientHeight} px)`);
        t.ok(box.pageWidth <= box.viewportWidth, `nothing on the page runs past the screen (${box.pageWidth} ≤ ${box.viewportWidth} px)`);
      });
    }
  }
}
