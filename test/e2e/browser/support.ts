/**
 * What the whole-journey and accessibility browser tests share: Debian's Chromium (never a downloaded
 * browser), the server started as `npm start` starts it, axe-core injected into the page, and screenshots
 * written to test/artifacts/screenshots/ (gitignored) so a change can be compared by eye.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { chromium, type Browser, type BrowserContext, type Page, type Response } from "playwright-core";
import type { Test } from "tap";
import { freePort } from "../../helpers/app.js";
import { IN_CI } from "../../helpers/database.js";
import { eventually } from "../../helpers/eventually.js";

export const CHROMIUM = "/usr/bin/chromium";
export const SCREENSHOTS = path.resolve(import.meta.dirname, "../../artifacts/screenshots");
const ROOT = path.resolve(import.meta.dirname, "../../..");

/** Skips the file (outside CI) or fails it (in CI) when Chromium is missing; true when it can run. */
export function chromiumAvailable(t: Test): boolean {
  if (existsSync(CHROMIUM)) return true;
  const reason = `${CHROMIUM} is missing (apt-get install -y chromium)`;
  if (IN_CI) t.fail(`the browser tests cannot run: ${reason}`);
  else t.plan(0, `skip: ${reason}`);
  return false;
}

export async function launchChromium(t: Test): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-quic",
      "--no-first-run",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  t.teardown(() => browser.close());
  return browser;
}

/** A page in a fresh context of `browser` that carries `cookies` for `url` (a TestClient's jar): that person, signed in. */
export async function pageSignedIn(browser: Browser, url: string, cookies: Map<string, string>): Promise<Page> {
  const context = await browser.newContext();
  await context.addCookies([...cookies].map(([name, value]) => ({ name, value, url })));
  return context.newPage();
}

export interface StartedServer {
  /** The address the server printed ("Open … in a browser"). */
  url: string;
  dataDir: string;
  child: ChildProcess;
  output: string[];
}

/**
 * `npm start` as a new user runs it: `node --import tsx src/server.ts` in the repository, development mode
 * (no NODE_ENV), a fresh data directory, no database or Redis settings, and the background tether-host build
 * on (HOST_BUILD_ON_START; it reuses dist/downloads when that is fresh, as `npm start` does). Ended by PID.
 */
export async function startLikeNpmStart(t: Test, env: Record<string, string> = {}): Promise<StartedServer> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "tether-journey-data-"));
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "src/server.ts"], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: dataDir,
      PORT: String(port),
      DATA_DIR: dataDir,
      HOST_BUILD_ON_START: "true",
      LOG_LEVEL: "info",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
    await rm(dataDir, { recursive: true, force: true });
  });
  const output: string[] = [];
  for (const stream of [child.stdout, child.stderr])
    stream.setEncoding("utf8").on("data", (chunk: string) => output.push(...chunk.split("\n").filter(Boolean)));
  let url: string | undefined;
  await eventually(
    () => {
      if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}: ${output.join("\n")}`);
      url = output.map((line) => /Open (https?:\/\/\S+) in a browser/.exec(line)?.[1]).find(Boolean);
      return url !== undefined;
    },
    // Cold: tsx compiles the whole server on a shared two-core machine.
    120_000,
    () => `the server's "Open … in a browser" line (got: ${output.join(" | ")})`,
  );
  return { url: url!, dataDir, child, output };
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  return (await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(context: unknown, options: unknown): Promise<{ violations: unknown[] }> } }).axe;
    return (await axe.run(document, { resultTypes: ["violations"] })).violations;
  })) as AxeViolation[];
}

const lastDocuments = new WeakMap<Page, Response>();

/** Remembers the last document `page` loaded, for auditing it with JavaScript off (see Accessibility). */
export function watchDocuments(page: Page): void {
  page.on("response", (response) => {
    if (response.request().isNavigationRequest() && response.frame() === page.mainFrame()) lastDocuments.set(page, response);
  });
}

/**
 * The twin of a page shown with JavaScript off, for what playwright cannot do there (evaluate): the last document
 * `page` loaded (watchDocuments), its scripts removed and its <noscript> shown, loaded at the same address in a
 * page of `context` (JavaScript on), with the server's own CSS. The caller closes it.
 */
export async function withoutScripts(context: BrowserContext, page: Page, viewport?: { width: number; height: number }): Promise<Page> {
  const document = lastDocuments.get(page);
  if (!document) throw new Error("watchDocuments(page) first: no document to measure");
  const html = (await document.text()).replace(/<script\b[^>]*>[\s\S]*?<\/script>/gi, "").replace(/<\/?noscript>/gi, "");
  const twin = await context.newPage();
  if (viewport) await twin.setViewportSize(viewport);
  const url = document.url();
  await twin.route(url, (route) => route.fulfill({ status: document.status(), contentType: "text/html; charset=utf-8", body: html }), { times: 1 });
  await twin.goto(url);
  return twin;
}

/**
 * axe-core in Chromium: the page's serious and critical violations, one line each. axe.min.js is evaluated
 * through the DevTools protocol, which the page's CSP (script-src 'self') does not govern. A context with
 * JavaScript off refuses even that, so such a page is audited as its twin: the same document (the response
 * body the browser received, watchDocuments) with its scripts removed and its <noscript> shown, loaded at the
 * same address in a context of our own, with the server's own CSS. Both are what a person without
 * JavaScript gets.
 */
export class Accessibility {
  /** Moderate and minor violations seen so far, one line per rule: reported, not failed on. */
  readonly lesser = new Set<string>();

  private constructor(private readonly twins: BrowserContext) {}

  static async open(browser: Browser, t: Test): Promise<Accessibility> {
    const twins = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    t.teardown(() => twins.close());
    return new Accessibility(twins);
  }

  async serious(page: Page, javaScript: boolean): Promise<string[]> {
    let violations: AxeViolation[];
    if (javaScript) violations = await axeViolations(page);
    else {
      const twin = await withoutScripts(this.twins, page);
      try {
        violations = await axeViolations(twin);
      } finally {
        await twin.close();
      }
    }
    const line = (violation: AxeViolation) =>
      `${violation.impact} ${violation.id} (${violation.help}): ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`;
    const serious = (violation: AxeViolation) => violation.impact === "serious" || violation.impact === "critical";
    for (const violation of violations.filter((v) => !serious(v))) this.lesser.add(`${violation.impact} ${violation.id} (${violation.help})`);
    return violations.filter(serious).map(line);
  }
}

/** A full-page screenshot named `name`.png in SCREENSHOTS. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}
