/**
 * Password reset over HTTP, as a browser without JavaScript would do it: request a link (the same answer
 * whether or not the account exists), follow it, choose a new password, and sign in with it; a used or
 * broken link says so.
 */
import t from "tap";
import { latestResetToken } from "../helpers/auth.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { browserClient, startPagesApp, textOf } from "./support.js";

const PASSWORD = "correct horse battery";
const { app, url } = await startPagesApp(t);

/** A user made through the JSON API. */
async function existingUser(name: string): Promise<{ email: string; id: string }> {
  const email = uniqueEmail("page");
  const id = await new TestClient(url).signUp(email, PASSWORD, name);
  return { email, id };
}

t.test("password reset: request a link, follow it, choose a new password, sign in with it", async (t) => {
  const { email } = await existingUser("Reset Me");
  const client = browserClient(url);
  const form = await client.get(`/forgot-password?email=${encodeURIComponent(email)}`);
  t.match(await form.text(), new RegExp(`value="${email.replace(/[.+]/g, "\\$&")}"`), "the email can be carried over");

  const sent = await client.request("POST", "/forgot-password", { form: { email } });
  t.equal(sent.status, 200);
  const sentText = textOf(await sent.text());
  t.match(sentText, "If an account exists for");
  t.match(sentText, `${email} , we have sent it a link`);
  const unknown = await client.request("POST", "/forgot-password", { form: { email: uniqueEmail("nobody") } });
  t.equal(unknown.status, 200, "the same answer for an unknown email: no account enumeration");
  const invalid = await client.request("POST", "/forgot-password", { form: { email: "not-an-email" } });
  t.equal(invalid.status, 400);
  t.match(await invalid.text(), /role="alert"/);

  const token = await latestResetToken(app.tetherDb);
  // The link sendResetPassword delivers: better-auth checks the token and redirects to our form.
  const link = await client.get(`/api/auth/reset-password/${token}?callbackURL=${encodeURIComponent(`${url}/reset-password`)}`);
  t.equal(link.status, 302);
  t.equal(link.headers.get("location"), `${url}/reset-password?token=${token}`);

  const page = await client.get(`/reset-password?token=${token}`);
  const pageHtml = await page.text();
  t.match(pageHtml, new RegExp(`<input type="hidden" name="token" value="${token}">`));
  t.match(pageHtml, /autocomplete="new-password"/);

  const short = await client.request("POST", "/reset-password", { form: { token, newPassword: "short" } });
  t.equal(short.status, 400);
  t.match(await short.text(), /aria-invalid="true"/);

  const changed = await client.request("POST", "/reset-password", { form: { token, newPassword: "a much better password" } });
  t.equal(changed.status, 303);
  t.equal(changed.headers.get("location"), "/reset-password/done");
  t.match(textOf(await (await client.get("/reset-password/done")).text()), "Your password has been changed");
  t.equal((await client.request("POST", "/login", { form: { email, password: PASSWORD } })).status, 401, "the old password is gone");
  t.equal((await client.request("POST", "/login", { form: { email, password: "a much better password" } })).status, 303);

  const reused = await browserClient(url).request("POST", "/reset-password", { form: { token, newPassword: "yet another password" } });
  t.equal(reused.status, 400);
  t.match(textOf(await reused.text()), "This reset link is invalid or has expired.");
  const bad = await browserClient(url).get("/reset-password?error=INVALID_TOKEN");
  t.equal(bad.status, 400);
  t.match(await bad.text(), /href="\/forgot-password">Request a new link/);
});
