import type { Browser } from "playwright-core";
import { pageSignedIn } from "../browser/support.js";
import type { McpWorld } from "../../mcp/helpers.js";

/**
 * What a client's user does with an approval URL: the owner, signed in to Tether in Chromium, opens it
 * and presses Approve or Reject on the proposal's own page (a plain form post, no script needed).
 * Resolves once Tether has answered the decision; returns the page's text before deciding.
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
    return shown;
  } finally {
    await page.close();
  }
}
