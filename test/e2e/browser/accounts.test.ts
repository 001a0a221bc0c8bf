/**
 * The account pages in Chromium (playwright-core, Debian's /usr/bin/chromium): a passkey made by a
 * virtual authenticator (DevTools protocol), two-factor with codes computed here from the secret the
 * page shows, sessions seen from two browsers, and every account page with JavaScript off.
 */
import { existsSync } from "node:fs";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import t, { type Test } from "tap";
import { PASSWORD } from "../../helpers/auth.js";
import { TestClient, uniqueEmail } from "../../helpers/client.js";
import { IN_CI } from "../../helpers/database.js";
import { totp } from "../../helpers/totp.js";
import { startPagesApp } from "../../pages/support.js";

const CHROMIUM = "/usr/bin/chromium";

if (!existsSync(CHROMIUM)) {
  if (IN_CI) t.fail(`${CHROMIUM} is missing`);
  else t.plan(0, `skip: ${CHROMIUM} is missing`);
} else {
  await accountBrowserTests();
}

async function accountBrowserTests(): Promise<void> {
  const { url } = await startPagesApp(t, { env: { PASSKEYS_ENABLED: "true" } });
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
  t.teardown(() => browser.close());

  /** A fresh context per browser; script errors and CSP violations fail the test. */
  async function open(t: Test, options: { javaScriptEnabled?: boolean } = {}): Promise<{ page: Page; context: BrowserContext }> {
    const context = await browser.newContext({ baseURL: url, javaScriptEnabled: options.javaScriptEnabled ?? true });
    t.teardown(() => context.close());
    const page = await context.newPage();
    page.on("pageerror", (error) => t.fail(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (message.type() === "error" && !/status of 4\d\d/.test(message.text())) t.fail(`console: ${message.text()}`);
    });
    return { page, context };
  }

  async function newUser(): Promise<string> {
    const email = uniqueEmail("browser");
    await new TestClient(url).signUp(email, PASSWORD, "Grace Hopper");
    return email;
  }

  async function signIn(page: Page, email: string, landing = "**/home"): Promise<void> {
    await page.goto("/login");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL(landing);
  }

  const signOut = async (page: Page) => {
    await page.getByRole("button", { name: "Sign out", exact: true }).click();
    await page.waitForURL("**/login?notice=signed-out");
  };

  t.test("register a passkey with a virtual authenticator, sign out, sign in with it", async (t) => {
    const { page } = await open(t);
    const email = await newUser();
    await signIn(page, email);
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("WebAuthn.enable");
    await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: {
        protocol: "ctap2",
        transport: "internal",
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });

    await page.goto("/settings/security");
    await page.getByLabel("Name for a new passkey").fill("Test laptop");
    await page.getByRole("button", { name: "Add a passkey" }).click();
    await page.waitForURL("**/settings/security?notice=passkey-added");
    t.ok(await page.locator("strong", { hasText: "Test laptop" }).isVisible(), "the passkey is listed");

    await signOut(page);
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.waitForURL("**/home");
    t.match(await page.getByRole("heading", { level: 1 }).textContent(), /Grace Hopper/, "signed in with the passkey");
    await page.goto("/settings/activity");
    t.ok(await page.locator('tr[data-event="passkey.add"]').count(), "the new passkey is in the activity");
    t.match(await page.locator('tr[data-event="sign-in"]').first().textContent(), /passkey/, "so is the passkey sign-in");
  });

  t.test("turn on TOTP with codes computed from the secret; sign in with a code and with a backup code; a wrong code is refused", async (t) => {
    const { page } = await open(t);
    const email = await newUser();
    await signIn(page, email);
    await page.goto("/settings/security");
    await page.locator("#enable-password").fill(PASSWORD);
    await page.getByRole("button", { name: "Set up two-factor" }).click();
    const secret = (await page.locator("[data-totp-secret]").textContent())!.trim();
    t.ok(await page.locator(".qr-code svg").isVisible(), "the QR code is shown");
    const backupCodes = await page.locator("[data-backup-codes] code").allTextContents();
    t.ok(backupCodes.length >= 5);

    await page.getByLabel("Code", { exact: true }).fill(totp(secret, 4));
    await page.getByRole("button", { name: "Turn on two-factor" }).click();
    await page.getByText("That code is not correct").waitFor();
    t.ok(await page.locator(".qr-code svg").isVisible(), "with htmx the QR code stays after a wrong code");
    await page.getByLabel("Code", { exact: true }).fill(totp(secret));
    await page.getByRole("button", { name: "Turn on two-factor" }).click();
    await page.waitForURL("**/settings/security?notice=two-factor-on");

    await signOut(page);
    await signIn(page, email, "**/login/two-factor");
    await page.getByLabel("Code from your authenticator app").fill(totp(secret, -6));
    await page.getByRole("button", { name: "Verify" }).click();
    await page.getByText("That code is not correct").waitFor();
    t.match(page.url(), /\/login\/two-factor$/, "a wrong code is refused");
    // The next step's code: the current one turned two-factor on, and a code is accepted once.
    await page.getByLabel("Code from your authenticator app").fill(totp(secret, 1));
    await page.getByRole("button", { name: "Verify" }).click();
    await page.waitForURL("**/home");

    await signOut(page);
    await signIn(page, email, "**/login/two-factor");
    await page.getByRole("link", { name: "Use a backup code instead" }).click();
    await page.getByLabel("Backup code").fill(backupCodes[0]!);
    await page.getByRole("button", { name: "Verify" }).click();
    await page.waitForURL("**/home");
    t.equal(new URL(page.url()).pathname, "/home", "signed in with a backup code");
  });

  t.test("two browsers: list the sessions, revoke the other one, its next request lands on /login", async (t) => {
    const email = await newUser();
    const first = await open(t);
    const second = await open(t);
    await signIn(first.page, email);
    await signIn(second.page, email);
    await first.page.goto("/settings/sessions");
    // Besides the sign-up's session (made over HTTP, no browser named): one row per browser.
    const rows = first.page.locator("tr[data-session-id]", { hasText: "Chrome" });
    t.equal(await rows.count(), 2, "both browsers' sessions are listed");
    const other = rows.filter({ hasNotText: "This session" });
    t.equal(await other.count(), 1, "one is this session");
    await other.getByRole("button", { name: /Sign out/ }).click();
    await first.page.getByText("That session is signed out.").waitFor();
    t.equal(await rows.count(), 1);

    await second.page.goto("/settings/sessions");
    await second.page.waitForURL(/\/login\?next=%2Fsettings%2Fsessions$/);
    t.equal(new URL(second.page.url()).pathname, "/login", "the revoked browser is sent to /login");
  });

  t.test("with JavaScript off: every account page works, two-factor included", async (t) => {
    const { page } = await open(t, { javaScriptEnabled: false });
    const email = await newUser();
    await page.goto("/login");
    t.notOk(await page.getByRole("button", { name: "Sign in with a passkey" }).isVisible(), "no passkey button without scripts");
    await signIn(page, email);
    for (const path of ["/settings/security", "/settings/sessions", "/settings/activity"]) {
      const response = await page.goto(path);
      t.equal(response?.status(), 200, `${path} renders`);
    }
    await page.goto("/settings/security");
    await page.locator("#enable-password").fill(PASSWORD);
    await page.getByRole("button", { name: "Set up two-factor" }).click();
    const secret = (await page.locator("[data-totp-secret]").textContent())!.trim();
    await page.getByLabel("Code", { exact: true }).fill(totp(secret));
    await page.getByRole("button", { name: "Turn on two-factor" }).click();
    await page.waitForURL("**/settings/security?notice=two-factor-on");

    await page.locator("#currentPassword").fill(PASSWORD);
    await page.locator("#newPassword").fill("another good passphrase");
    await page.getByRole("button", { name: "Change password" }).click();
    await page.waitForURL("**/settings/security?notice=password-others");

    await signOut(page);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password", { exact: true }).fill("another good passphrase");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL("**/login/two-factor");
    await page.getByLabel("Code from your authenticator app").fill(totp(secret, 1));
    await page.getByRole("button", { name: "Verify" }).click();
    await page.waitForURL("**/home");
    await page.goto("/settings/sessions");
    await page.getByRole("button", { name: /Sign out .* on / }).click();
    await page.waitForURL("**/login");
    t.equal(new URL(page.url()).pathname, "/login", "signed this session out from the sessions page");
  });
}
