/**
 * The account pages without JavaScript (plain form posts, as a browser with scripts off sends them):
 * security (password, two-factor), the two-factor sign-in step, sessions, activity, and the admin's
 * views. The same flows with JavaScript and passkeys run in Chromium (browser.test.ts).
 */
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { makeSiteAdmin, PASSWORD } from "../helpers/auth.js";
import { uniqueEmail } from "../helpers/client.js";
import { totp } from "../helpers/totp.js";
import { browserClient, HTMX_HEADERS, textOf } from "../pages/support.js";

const { app, url } = await startTestApp(t, { env: { PASSKEYS_ENABLED: "true" } });

async function signedUp(label: string) {
  const client = browserClient(url);
  const email = uniqueEmail(label);
  const id = await client.signUp(email, PASSWORD, label);
  return { client, email, id };
}

const form = (client: ReturnType<typeof browserClient>, path: string, fields: Record<string, string>, headers?: Record<string, string>) =>
  client.request("POST", path, { form: fields, ...(headers ? { headers } : {}) });

t.test("two-factor: set up with a code, sign in with a code or a backup code, wrong codes refused, turn off with the password", async (t) => {
  const { client, email } = await signedUp("totp");
  const page = await client.get("/settings/security");
  t.equal(page.status, 200);
  t.match(textOf(await page.text()), /Two-factor authentication Off/);

  t.equal((await form(client, "/settings/security/two-factor/enable", { password: "wrong password" })).status, 400, "a wrong password is refused");
  const setup = await form(client, "/settings/security/two-factor/enable", { password: PASSWORD });
  t.equal(setup.status, 200);
  const html = await setup.text();
  t.match(html, /<svg[^>]*>/, "the QR code is an SVG in the page");
  const secret = /data-totp-secret>([A-Z2-7]+)</.exec(html)?.[1];
  t.ok(secret, "the key is shown for manual entry");
  const backupCodes = [...html.matchAll(/<li><code>([^<]+)<\/code><\/li>/g)].map((m) => m[1]!);
  t.ok(backupCodes.length >= 5, "backup codes are shown");

  const wrong = await form(client, "/settings/security/two-factor/confirm", { code: totp(secret!, 5) });
  t.equal(wrong.status, 401);
  t.match(textOf(await wrong.text()), /That code is not correct/);
  const confirmed = await form(client, "/settings/security/two-factor/confirm", { code: totp(secret!) });
  t.equal(confirmed.status, 303);
  t.equal(confirmed.headers.get("location"), "/settings/security?notice=two-factor-on");
  const after = textOf(await (await client.get("/settings/security?notice=two-factor-on")).text());
  t.match(after, /Two-factor authentication is on/);
  t.notOk(after.includes(backupCodes[0]!), "backup codes are not shown again");

  const signIn = async () => {
    const visitor = browserClient(url);
    const first = await form(visitor, "/login", { email, password: PASSWORD });
    t.equal(first.status, 303);
    t.equal(first.headers.get("location"), "/login/two-factor", "the password step asks for a code");
    t.equal((await visitor.get("/home")).status, 302, "no session before the code");
    return visitor;
  };

  const visitor = await signIn();
  const refused = await form(visitor, "/login/two-factor", { code: totp(secret!, 7), method: "totp" });
  t.equal(refused.status, 401, "a wrong code is refused");
  t.match(textOf(await refused.text()), /That code is not correct/);
  // The next step's code: the current one turned two-factor on, and a code is accepted once.
  const accepted = await form(visitor, "/login/two-factor", { code: totp(secret!, 1), method: "totp" });
  t.equal(accepted.headers.get("location"), "/home");
  t.equal((await visitor.get("/home")).status, 200, "signed in with the code");

  const withBackup = await signIn();
  t.equal((await withBackup.get("/login/two-factor?method=backup")).status, 200);
  const byBackup = await form(withBackup, "/login/two-factor", { code: backupCodes[0]!, method: "backup" });
  t.equal(byBackup.headers.get("location"), "/home", "a backup code signs in");
  const reused = await signIn();
  t.equal((await form(reused, "/login/two-factor", { code: backupCodes[0]!, method: "backup" })).status, 401, "a backup code works once");

  // With htmx the refused code comes back as the form alone.
  const htmxVisitor = await signIn();
  const fragment = await form(htmxVisitor, "/login/two-factor", { code: "000000", method: "totp" }, HTMX_HEADERS);
  const fragmentHtml = await fragment.text();
  t.notMatch(fragmentHtml, /<html/, "a fragment, not a page");
  t.match(fragmentHtml, /id="two-factor-form"/);

  t.equal((await form(client, "/settings/security/two-factor/disable", { password: "nope nope" })).status, 400);
  const off = await form(client, "/settings/security/two-factor/disable", { password: PASSWORD });
  t.equal(off.headers.get("location"), "/settings/security?notice=two-factor-off");
  const plain = browserClient(url);
  t.equal((await form(plain, "/login", { email, password: PASSWORD })).headers.get("location"), "/home", "no code asked once it is off");
});

t.test("password change, optionally signing out every other session", async (t) => {
  const { client, email } = await signedUp("password");
  const other = browserClient(url);
  await form(other, "/login", { email, password: PASSWORD });
  t.equal((await other.get("/home")).status, 200);

  const refused = await form(client, "/settings/security/password", { currentPassword: "not it at all", newPassword: "a brand new one", signOutOthers: "on" });
  t.equal(refused.status, 400);
  t.match(textOf(await refused.text()), /Your current password is not correct/);
  const changed = await form(client, "/settings/security/password", { currentPassword: PASSWORD, newPassword: "a brand new one", signOutOthers: "on" });
  t.equal(changed.headers.get("location"), "/settings/security?notice=password-others");
  t.equal((await client.get("/home")).status, 200, "this session goes on");
  t.equal((await other.get("/home")).headers.get("location"), "/login", "the other session is signed out");
  t.equal((await form(browserClient(url), "/login", { email, password: "a brand new one" })).headers.get("location"), "/home");
});

t.test("sessions: listed with browser, system and address; revoke one; revoke the others", async (t) => {
  const { client, email } = await signedUp("sessions");
  const firefox = browserClient(url, { headers: { "user-agent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:131.0) Gecko/20100101 Firefox/131.0" } });
  await form(firefox, "/login", { email, password: PASSWORD });
  const third = browserClient(url);
  await form(third, "/login", { email, password: PASSWORD });

  const html = await (await client.get("/settings/sessions")).text();
  const text = textOf(html);
  t.match(text, /Firefox 131 Windows 10/, "browser and system from the user agent");
  t.match(text, /127\.0\.0\.1/);
  t.equal((html.match(/This session/g) ?? []).length, 1, "one session is this one");
  const ids = [...html.matchAll(/data-session-id="([^"]+)"/g)].map((m) => m[1]!);
  t.equal(ids.length, 3);
  const firefoxId = [...html.matchAll(/<tr data-session-id="([^"]+)">\s*<td class="nowrap">Firefox/g)][0]![1]!;

  const revoked = await form(client, `/settings/sessions/${firefoxId}/revoke`, {});
  t.equal(revoked.headers.get("location"), "/settings/sessions?notice=revoked");
  t.equal((await firefox.get("/home")).headers.get("location"), "/login", "the revoked session's next request lands on /login");
  t.equal((await third.get("/home")).status, 200, "the others go on");
  t.equal((await form(client, `/settings/sessions/${firefoxId}/revoke`, {})).status, 404, "gone is gone");

  t.equal((await form(client, "/settings/sessions/revoke-others", {})).headers.get("location"), "/settings/sessions?notice=others");
  t.equal((await third.get("/home")).headers.get("location"), "/login");
  t.equal((await client.get("/home")).status, 200);
});

t.test("activity pages: your own, paginated; everyone's for site admins only; a user's sessions and activity for admins", async (t) => {
  const { client, email, id } = await signedUp("activity");
  for (let i = 0; i < 26; i++) await form(browserClient(url), "/login", { email, password: i % 2 ? PASSWORD : "wrong password" });
  await app.tetherActivity.flush();
  const first = await (await client.get("/settings/activity")).text();
  t.match(textOf(first), /Failed sign-in/);
  t.match(textOf(first), /Signed in/);
  const older = /href="(\/settings\/activity\?before=\d+)"/.exec(first)?.[1];
  t.ok(older, "an Older link");
  t.equal((await client.get(older!)).status, 200);

  t.equal((await client.get("/admin/activity")).status, 403, "not for members");
  t.equal((await client.get(`/admin/users/${id}`)).status, 403);

  const admin = await signedUp("admin");
  await makeSiteAdmin(app, admin.id);
  const filteredHtml = await (await admin.client.get(`/admin/activity?user=${encodeURIComponent(email)}&event=sign-in.failed`)).text();
  t.match(textOf(filteredHtml), new RegExp(`${email.replace(/[.+]/g, "\\$&")} Failed sign-in`));
  const shown = new Set([...filteredHtml.matchAll(/data-event="([^"]+)"/g)].map((m) => m[1]));
  t.strictSame([...shown], ["sign-in.failed"], "the event filter applies");
  t.match(textOf(await (await admin.client.get("/admin/activity?user=nobody%40example.com")).text()), /No account has that email address/);

  const userPage = textOf(await (await admin.client.get(`/admin/users/${id}`)).text());
  t.match(userPage, /Sessions/);
  t.match(userPage, /Recent activity/);
  const out = await form(admin.client, `/admin/users/${id}/revoke-sessions`, {});
  t.equal(out.headers.get("location"), `/admin/users/${id}?notice=signed-out`);
  t.equal((await client.get("/home")).headers.get("location"), "/login", "the user is signed out everywhere");
});
