/**
 * The pages in a real browser: Debian's Chromium driven by playwright-core, launched once for the
 * whole file (each test gets a fresh context: its own cookies). Screenshots go to test/artifacts/.
 */
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import t, { type Test } from "tap";
import { TestClient, uniqueEmail } from "../../helpers/client.js";
import { IN_CI } from "../../helpers/database.js";
import { startPagesApp } from "../../pages/support.js";
import { latestResetToken, makeSiteAdmin } from "../../helpers/auth.js";
import { CHROMIUM, launchChromium } from "./support.js";

const ARTIFACTS = path.resolve(import.meta.dirname, "../../artifacts");
const PASSWORD = "correct horse battery";

if (!existsSync(CHROMIUM)) {
  const reason = `${CHROMIUM} is missing (apt-get install -y chromium)`;
  if (IN_CI) {
    t.fail(`browser tests cannot run: ${reason}`);
  } else {
    console.log(`# skipping the browser tests: ${reason}`);
    t.plan(0, `skip: ${reason}`);
  }
} else {
  await browserTests();
}

async function browserTests(): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const { app, url } = await startPagesApp(t);
  const browser = await launchChromium(t);

  /**
   * A test with a fresh browser context (its own cookies). Script errors and CSP violations logged by
   * the page fail the test.
   */
  /** `expectConsole`: console errors the test provokes on purpose (e.g. a failed request). */
  type PageOptions = { javaScriptEnabled?: boolean; expectConsole?: RegExp };
  type OpenPage = (options?: PageOptions) => Promise<{ page: Page; context: BrowserContext }>;
  function browserTest(name: string, body: (t: Test, open: OpenPage) => Promise<void>): void {
    t.test(name, async (t) => {
      const problems: string[] = [];
      const contexts: BrowserContext[] = [];
      const open: OpenPage = async (options = {}) => {
        const opened = await openPage(options, problems);
        contexts.push(opened.context);
        return opened;
      };
      try {
        await body(t, open);
      } finally {
        await Promise.all(contexts.map((context) => context.close()));
      }
      t.strictSame(problems, [], "no script errors or CSP violations");
    });
  }

  async function openPage(options: PageOptions = {}, problems: string[] = []): Promise<{ page: Page; context: BrowserContext }> {
    const context = await browser.newContext({
      baseURL: url,
      viewport: { width: 1200, height: 780 },
      javaScriptEnabled: options.javaScriptEnabled ?? true,
      permissions: ["clipboard-read", "clipboard-write"],
    });
    const page = await context.newPage();
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      // Chromium logs every 4xx answer as a failed resource load; a refused form or a 403/404 page is
      // the app working as designed. Anything else (a CSP violation, a script error) is a defect.
      const expected =
        /Failed to load resource: the server responded with a status of 4\d\d/.test(message.text()) || options.expectConsole?.test(message.text());
      if (message.type() === "error" && !expected) {
        problems.push(`console on ${page.url()}: ${message.text()} (${message.location().url})`);
      }
    });
    return { page, context };
  }

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

  async function signIn(page: Page, email: string, password = PASSWORD): Promise<void> {
    await page.goto("/login");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password", { exact: true }).fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL("**/home");
  }

  /** A user made over HTTP (faster than the form), for tests about something else. */
  async function newUser(name: string): Promise<{ id: string; email: string }> {
    const email = uniqueEmail(name.toLowerCase().split(" ")[0]);
    const id = await new TestClient(url).signUp(email, PASSWORD, name);
    return { id, email };
  }

  browserTest("sign up and land on /home; sign out and land on /login; back shows no protected page", async (t, openPage) => {
    const { page } = await openPage();
    await page.goto("/signup");
    await shot(page, "signup");
    await page.getByLabel("Name").fill("Ada Lovelace");
    await page.getByLabel("Email").fill(uniqueEmail("ada"));
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Create account" }).click();
    await page.waitForURL("**/home");
    t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Welcome, Ada Lovelace");
    t.ok(await page.getByRole("button", { name: "Sign out" }).isVisible(), "the layout offers sign-out");
    await shot(page, "home");

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/login?notice=signed-out");
    t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Sign in to Tether");
    t.ok(await page.getByRole("status").getByText("You are signed out.").isVisible(), "the page says what happened");
    await shot(page, "login");

    await page.goBack();
    await page.waitForLoadState();
    t.match(page.url(), /\/login$/, "back to /home after sign-out ends on /login (no-store: nothing cached)");
    t.equal(await page.getByText("Welcome, Ada Lovelace").count(), 0);
  });

  browserTest("sign in with a wrong password and see the message, with the email kept", async (t, openPage) => {
    const { email } = await newUser("Grace Hopper");
    const { page } = await openPage();
    await page.goto("/login");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password", { exact: true }).fill("not the password");
    const htmxRequest = page.waitForRequest((request) => request.url().endsWith("/login") && request.headers()["hx-request"] === "true");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await htmxRequest;
    const alert = page.getByRole("alert").filter({ hasText: "Invalid email or password" });
    await alert.waitFor();
    t.equal(await page.getByLabel("Email").inputValue(), email, "the email is kept");
    t.equal(await page.evaluate(() => document.activeElement?.id), "password", "focus is on the field to fix");
    t.match(page.url(), /\/login$/);
    await shot(page, "login-error");
  });

  browserTest("visit /home anonymously and land on /login; visit /login signed in and land on /home", async (t, openPage) => {
    const { email } = await newUser("Alan Turing");
    const { page } = await openPage();
    await page.goto("/home");
    t.match(page.url(), /\/login$/);
    await signIn(page, email);
    await page.goto("/login");
    t.match(page.url(), /\/home$/);
    await page.goto("/signup");
    t.match(page.url(), /\/home$/);
  });

  browserTest("create a token, see it once, then see only its prefix; revoke it after confirming", async (t, openPage) => {
    const { email } = await newUser("Linus Token");
    const { page } = await openPage();
    await signIn(page, email);
    await page.getByRole("link", { name: "API tokens" }).first().click();
    await page.waitForURL("**/settings/tokens");
    await shot(page, "tokens-empty");

    await page.getByLabel("Name").fill("CI deploys");
    await page.getByRole("button", { name: "Create token" }).click();
    const reveal = page.getByLabel("The new token");
    await reveal.waitFor();
    const token = await reveal.inputValue();
    t.match(token, /^sk_[A-Za-z0-9_-]{43}$/);
    await page.getByRole("button", { name: "Copy" }).click();
    await page.getByRole("button", { name: "Copied" }).waitFor();
    t.equal(await page.evaluate(() => navigator.clipboard.readText()), token, "the copy button copied the token");
    await shot(page, "tokens-created");

    await page.reload();
    t.notOk((await page.content()).includes(token), "after a reload the token is gone for good");
    t.equal(await page.getByLabel("The new token").count(), 0);
    t.equal(await page.getByRole("cell", { name: `${token.slice(0, 9)}…` }).count(), 1, "only its prefix is listed");
    await shot(page, "tokens-list");

    let confirmText = "";
    page.once("dialog", (dialog) => {
      confirmText = dialog.message();
      void dialog.accept();
    });
    await page.getByRole("button", { name: "Revoke CI deploys" }).click();
    await page.getByRole("status").filter({ hasText: "Token “CI deploys” revoked." }).waitFor();
    t.match(confirmText, /Revoke “CI deploys”\?/, "hx-confirm asked first");
    t.ok(await page.getByText("You have no API tokens.").isVisible());
  });

  browserTest("a non-admin on /admin/users gets Forbidden; an admin deactivates a user there", async (t, openPage) => {
    const admin = await newUser("Barbara Admin");
    const member = await newUser("Dennis Member");
    const { page } = await openPage();
    await signIn(page, admin.email);
    t.equal(await page.getByRole("link", { name: "Users" }).count(), 0, "no Users link for a non-admin");
    const forbidden = await page.goto("/admin/users");
    t.equal(forbidden?.status(), 403);
    t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Forbidden");
    await shot(page, "admin-forbidden");

    await makeSiteAdmin(app, admin.id);
    const { page: memberPage } = await openPage();
    await signIn(memberPage, member.email);

    await page.goto("/admin/users");
    t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Users");
    await shot(page, "admin-users");
    const row = page.getByRole("row").filter({ hasText: member.email });
    page.once("dialog", (dialog) => void dialog.accept());
    await row.getByRole("button", { name: "Deactivate" }).click();
    await page.getByRole("status").filter({ hasText: "Dennis Member is deactivated" }).waitFor();
    t.ok(await page.getByRole("row").filter({ hasText: member.email }).getByText("Deactivated").isVisible());
    t.equal(await page.getByRole("row").filter({ hasText: admin.email }).getByRole("button").count(), 0, "no buttons on one's own row");
    await shot(page, "admin-deactivated");

    await memberPage.goto("/home");
    t.match(memberPage.url(), /\/login$/, "the deactivated user is signed out at once");
  });

  browserTest("the same sign-in with JavaScript disabled, and a token revoked through the confirmation page", async (t, openPage) => {
    const { email } = await newUser("Noscript Nora");
    const { page } = await openPage({ javaScriptEnabled: false });
    await page.goto("/login");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password", { exact: true }).fill("wrong password");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("alert").filter({ hasText: "Invalid email or password" }).waitFor();
    t.equal(await page.getByLabel("Email").inputValue(), email);
    await shot(page, "login-error-nojs");

    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL("**/home");
    t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Welcome, Noscript Nora");

    await page.goto("/settings/tokens");
    await page.getByLabel("Name").fill("laptop script");
    await page.getByRole("button", { name: "Create token" }).click();
    t.match(await page.getByLabel("The new token").inputValue(), /^sk_/);
    t.equal(await page.getByRole("button", { name: "Copy" }).isVisible(), false, "no copy button without JavaScript");
    await shot(page, "tokens-created-nojs");
    await page.getByRole("button", { name: "Revoke laptop script" }).click();
    await page.waitForURL(/\/revoke\??$/);
    await shot(page, "tokens-revoke-confirm-nojs");
    await page.getByRole("button", { name: "Revoke token" }).click();
    await page.waitForURL(/\/settings\/tokens\?notice=revoked$/);
    t.ok(await page.getByText("You have no API tokens.").isVisible());

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/login?notice=signed-out");
  });

  browserTest("forgot password, follow the emailed link, choose a new password, sign in with it", async (t, openPage) => {
    const { email } = await newUser("Reset Rita");
    const { page } = await openPage();
    await page.goto("/login");
    await page.getByRole("link", { name: "Forgot password?" }).click();
    await page.waitForURL("**/forgot-password");
    await shot(page, "forgot-password");
    await page.getByLabel("Email").fill(email);
    await page.getByRole("button", { name: "Send reset link" }).click();
    await page.getByRole("status").filter({ hasText: "we have sent it a link" }).waitFor();
    await shot(page, "forgot-password-sent");

    const token = await latestResetToken(app.tetherDb);
    // The link sendResetPassword delivers: better-auth checks it, then redirects to our form.
    await page.goto(`/api/auth/reset-password/${token}?callbackURL=${encodeURIComponent(`${url}/reset-password`)}`);
    t.match(page.url(), /\/reset-password\?token=/);
    await shot(page, "reset-password");
    await page.getByLabel("New password").fill("a brand new password");
    await page.getByRole("button", { name: "Change password" }).click();
    await page.waitForURL("**/reset-password/done");
    t.ok(await page.getByText("Your password has been changed").isVisible());
    await signIn(page, email, "a brand new password");
  });

  browserTest("when an htmx request fails, the user sees the error page, or a message when there is no answer", async (t, openPage) => {
    const { id, email } = await newUser("Stale Tab");
    const { page } = await openPage({ expectConsole: /htmx:error|net::ERR_CONNECTION_REFUSED/ });
    await signIn(page, email);
    await page.goto("/settings/tokens");
    await page.getByLabel("Name").fill("revoked elsewhere");
    await page.getByRole("button", { name: "Create token" }).click();
    await page.getByLabel("The new token").waitFor();

    // Another tab revokes it; this page still shows the button. The 404 page replaces the body.
    await app.tetherDb.deleteFrom("api_token").where("user_id", "=", id).execute();
    page.once("dialog", (dialog) => void dialog.accept());
    await page.getByRole("button", { name: "Revoke revoked elsewhere" }).click();
    await page.getByRole("heading", { level: 1, name: "Not found" }).waitFor();
    t.ok(await page.getByText("This token does not exist any more.").isVisible());
    t.equal(await page.title(), "Not found · Tether");
    t.equal(await page.getByRole("banner").getByRole("button", { name: "Sign out" }).count(), 1, "still the whole layout, not a fragment in a table");
    await shot(page, "htmx-error-page");

    // No answer at all: htmx can swap nothing, so our script says so.
    await page.goto("/settings/tokens");
    await page.route("**/settings/tokens", (route) => (route.request().method() === "POST" ? route.abort("connectionrefused") : route.continue()));
    await page.getByLabel("Name").fill("offline");
    await page.getByRole("button", { name: "Create token" }).click();
    await page.getByRole("alert").filter({ hasText: "Tether could not be reached" }).waitFor();
    t.ok(await page.getByRole("button", { name: "Create token" }).isEnabled(), "the button is usable again");
    await shot(page, "htmx-network-error");
  });

  browserTest("error pages look like the site", async (t, openPage) => {
    const { page } = await openPage();
    const response = await page.goto("/no/such/page");
    t.equal(response?.status(), 404);
    t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Page not found");
    await shot(page, "not-found");
  });
}
