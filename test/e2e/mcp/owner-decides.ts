import type { Browser } from "playwright-core";
import { pageSignedIn } from "../browser/support.js";
import type { McpWorld } from "../../mcp/helpers.js";

/**
 * What a client's user does with an approval URL: the owner, signed in to Tether in Chromium, opens it
 * and presses Approve or Reject on the proposal's own page (a plain form post, no script needed).
 * Resolves once Tether has answered the decision and the page it leads to has loaded; returns the page's
 * text before deciding. The page's whole context is closed after: closing a page in the middle of that
 * navigation could leave `page.close()` waiting for ever (seen in CI as a 15-minute hang).
 */
export async function ownerDecides(browser: Browser, world: McpWorld, url: string, decision: "Approve" | "Reject"): Promise<string> {
  const page = await pageSignedIn(browser, world.url, world.owner.cookies);
  try {
    await page.goto(url);
    const shown = (await page.textContent("main")) ?? "";
    const path = `/${decision.toLowerCase()}`;
    await Promise.all([
      page.waitForResponse((response) => response.request().method() === "POST" && new URL(response.url()).pathname.endsWith(path)),
      page.click(`button:has-text('${decision}')`),
    ]);
    await page.waitForURL((landed) => landed.searchParams.has("notice"), { waitUntil: "load" });
    return shown;
  } finally {
    await page.context().close();
  }
}
