import type { Test } from "tap";
import { buildApp, type App } from "../../src/app.js";
import { loadConfig } from "../../src/config/env.js";
import type { GuardedPagePlugin } from "../../src/web/index.js";
import { closeListening, freePort, TEST_SECRET } from "../helpers/app.js";
import { TestClient } from "../helpers/client.js";
import { openTestDatabase } from "../helpers/database.js";

export interface PagesApp {
  app: App;
  url: string;
}

/**
 * The example app over loopback HTTP on a fresh database, like `startTestApp`, with extra pages for
 * the guarded context (which must be given to `buildApp`: they cannot be added after it loads).
 */
export async function startPagesApp(t: Test, options: { env?: Record<string, string>; guardedPages?: GuardedPagePlugin[] } = {}): Promise<PagesApp> {
  const port = await freePort();
  const url = `http://localhost:${port}`;
  const config = loadConfig({ NODE_ENV: "test", BETTER_AUTH_URL: url, PORT: String(port), ...options.env });
  const database = await openTestDatabase();
  const app = await buildApp({ config, db: database.db, secret: TEST_SECRET, ...(options.guardedPages ? { guardedPages: options.guardedPages } : {}) });
  await app.listen({ port, host: "127.0.0.1" });
  t.teardown(async () => {
    await closeListening(app);
    await database.close();
  });
  return { app, url };
}

/** A browser-like client: asks for HTML and sends the site's own Origin on state-changing requests. */
export function browserClient(url: string, defaults: { origin?: string | null; headers?: Record<string, string> } = {}): TestClient {
  return new TestClient(url, { ...defaults, headers: { accept: "text/html,application/xhtml+xml", ...defaults.headers } });
}

/** Headers htmx 4 sends with a request that swaps part of the page. */
export const HTMX_HEADERS = { "hx-request": "true", "hx-request-type": "partial" } as const;

/** The text of an HTML page with tags removed and whitespace collapsed, for readable assertions. */
export function textOf(html: string): string {
  return html
    .replace(/<(script|style)[\s\S]*?<\/\1>/g, " ")
    .replace(/<[^>]+>/g, " ")
    .replace(/&amp;/g, "&")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/\s+/g, " ")
    .trim();
}
