/**
 * Recovering an account from the reset page, as a browser without JavaScript (and with htmx): the
 * confirmation says what the reset ended and lists what it left working (API tokens, devices, passkeys), each
 * with a revoke button that works, for the browser that made the reset and only for a while.
 */
import { sql } from "kysely";
import t from "tap";
import { createDevice, verifyDeviceToken } from "../../src/plugins/host/devices.js";
import { startTestApp } from "../helpers/app.js";
import { bearer, latestResetToken, mintToken, newUser, PASSWORD, whoAmI } from "../helpers/auth.js";
import { readJson, TestClient } from "../helpers/client.js";
import { authoriseClient, callMcp, refreshed } from "../helpers/oauth.js";
import { secretOf, totp } from "../helpers/totp.js";
import { browserClient, HTMX_HEADERS, textOf } from "../pages/support.js";

const { app, url } = await startTestApp(t, { env: { PASSKEYS_ENABLED: "true" } });
const db = app.tetherDb;

async function resetToken(email: string): Promise<string> {
  const sent = await browserClient(url).request("POST", "/forgot-password", { form: { email } });
  if (sent.status !== 200) throw new Error(`forgot-password: ${sent.status}`);
  return latestResetToken(db);
}

/** Resets the password from the page in a fresh browser; returns that browser and the answer. */
async function resetFromPage(email: string) {
  const browser = browserClient(url);
  const token = await resetToken(email);
  const answer = await browser.request("POST", "/reset-password", { form: { token, newPassword: "the owner's new password" } });
  return { browser, answer };
}

t.test("the confirmation lists the API tokens and devices that survived the reset, and its revoke buttons work", async (t) => {
  const owner = await newUser(url, "recover");
  const apiToken = await mintToken(owner.client, { name: "Deploy bot" });
  const device = await createDevice(db, { userId: owner.id, name: "attic-pc", platform: "linux" });
  // A passkey the intruder registered (its key material does not matter here: nothing signs with it).
  await db
    .insertInto("passkey")
    .values({
      id: "pk-intruder",
      name: "Intruder's key",
      publicKey: "unused",
      userId: owner.id,
      credentialID: "cred-intruder",
      counter: 0,
      deviceType: "singleDevice",
      backedUp: false,
      transports: null,
      createdAt: new Date(),
      aaguid: null,
    })
    .execute();
  const intruder = new TestClient(url);
  await intruder.signIn(owner.email);
  const client = await refreshed(url, await authoriseClient(url, intruder, "Intruder Agent"));

  const { browser, answer } = await resetFromPage(owner.email);
  t.equal(answer.status, 303);
  t.equal(answer.headers.get("location"), "/reset-password/done", "the reset lands on its confirmation");
  const cookie = answer.headers.getSetCookie().find((c) => c.startsWith("better-auth.recovery="));
  t.match(cookie, /; Path=\/reset-password(;|$)/i, "the recovery cookie goes to the reset pages only");
  t.match(cookie, /; HttpOnly/i);
  t.match(cookie, /; SameSite=Strict/i);
  t.match(cookie, /; Max-Age=900/i, "for 15 minutes");

  const page = await browser.get("/reset-password/done");
  t.equal(page.status, 200);
  t.equal(page.headers.get("cache-control"), "no-store");
  const text = textOf(await page.text());
  t.match(text, "Your password has been changed");
  t.match(text, "Every session was signed out, and every MCP client you had allowed lost its access");
  t.match(text, /API token Deploy bot sk_[\w-]+…/, "the token, by name");
  t.match(text, /Device attic-pc \(linux\)/, "the device, by name");
  t.match(text, /Passkey Intruder's key ?, added/, "the passkey, by name");
  t.equal((await callMcp(url, client.accessToken)).status, 401, "the MCP client is cut off already");

  // Without JavaScript: the form posts, the page comes back with a notice.
  const tokenId = (await app.tetherApiTokens.list(owner.id))[0]!.id;
  const revokedToken = await browser.request("POST", `/reset-password/done/tokens/${tokenId}/revoke`, { form: {} });
  t.equal(revokedToken.status, 303);
  t.equal(revokedToken.headers.get("location"), "/reset-password/done?notice=token");
  t.equal((await whoAmI(url, bearer(apiToken))).status, 401, "the API token stops working at once");
  const after = textOf(await (await browser.get("/reset-password/done?notice=token")).text());
  t.match(after, "API token revoked.");
  t.notMatch(after, "Deploy bot");

  const removedPasskey = await browser.request("POST", "/reset-password/done/passkeys/pk-intruder/remove", { form: {} });
  t.equal(removedPasskey.headers.get("location"), "/reset-password/done?notice=passkey");
  t.equal((await db.selectFrom("passkey").select("id").where("userId", "=", owner.id).execute()).length, 0, "the passkey is gone");

  // With htmx: the panel comes back in place.
  const revokedDevice = await browser.request("POST", `/reset-password/done/devices/${device.deviceId}/revoke`, { form: {}, headers: HTMX_HEADERS });
  t.equal(revokedDevice.status, 200);
  const panel = await revokedDevice.text();
  t.notMatch(panel, /<html/, "a fragment");
  t.match(textOf(panel), "Device revoked.");
  t.match(textOf(panel), "Nothing else can reach your account");
  t.match(await verifyDeviceToken(db, device.token), { ok: false, reason: "revoked" }, "the device's credential no longer verifies");
  t.equal((await browser.request("POST", `/reset-password/done/devices/${device.deviceId}/revoke`, { form: {} })).status, 404, "gone is gone");

  await app.tetherActivity.flush();
  const signedIn = new TestClient(url);
  t.equal((await signedIn.signIn(owner.email, "the owner's new password")).status, 200);
  const events = (await readJson(await signedIn.get("/api/activity?limit=50"))).entries.map((e: { event: string }) => e.event);
  for (const name of ["password.reset", "oauth.revoke", "token.revoke", "passkey.remove", "revoke"]) t.ok(events.includes(name), `${name} in the activity log`);
});

t.test("the revoke buttons need the browser that made the reset, its origin, and its time", async (t) => {
  const owner = await newUser(url, "guarded");
  await mintToken(owner.client, { name: "Kept" });
  const tokenId = (await app.tetherApiTokens.list(owner.id))[0]!.id;
  const { browser } = await resetFromPage(owner.email);
  const revoke = (client: TestClient, headers?: Record<string, string>) =>
    client.request("POST", `/reset-password/done/tokens/${tokenId}/revoke`, { form: {}, ...(headers ? { headers } : {}) });

  const stranger = browserClient(url);
  const bare = await stranger.get("/reset-password/done");
  t.equal(bare.status, 200);
  const bareText = textOf(await bare.text());
  t.match(bareText, "Sign in, then check your API tokens");
  t.notMatch(bareText, "Kept", "nothing listed without the recovery cookie");
  const refused = await revoke(stranger);
  t.equal(refused.status, 403);
  t.match(textOf(await refused.text()), "Sign in with your new password");

  const foreign = await browser.request("POST", `/reset-password/done/tokens/${tokenId}/revoke`, { form: {}, headers: { origin: "https://evil.example" } });
  t.equal(foreign.status, 403, "another site's form is refused by the origin guard");

  // The two-factor challenge cookie is signed with the same secret: it must not pass for a recovery.
  const twoFactor = await newUser(url, "challenge");
  const enabled = await readJson(await twoFactor.client.post("/api/auth/two-factor/enable", { password: PASSWORD }));
  t.equal((await twoFactor.client.post("/api/auth/two-factor/verify-totp", { code: totp(secretOf(enabled.totpURI)) })).status, 200);
  const challenged = new TestClient(url);
  await challenged.signIn(twoFactor.email);
  const challenge = challenged.cookies.get("better-auth.two_factor");
  t.ok(challenge, "a two-factor challenge cookie");
  const forged = browserClient(url);
  forged.cookies.set("better-auth.recovery", challenge!);
  t.equal((await revoke(forged)).status, 403, "a challenge cookie is no recovery");

  await sql`update verification set "expiresAt" = now() - interval '1 second' where identifier like 'tether-recovery:%'`.execute(db);
  t.equal((await revoke(browser)).status, 403, "after its time the page revokes nothing");
  t.notMatch(textOf(await (await browser.get("/reset-password/done")).text()), "Kept");
  t.equal((await app.tetherApiTokens.list(owner.id)).length, 1, "the token is still there");
});

t.test("with two-factor on, the mailbox alone sees and revokes nothing", async (t) => {
  const owner = await newUser(url, "mailbox");
  await mintToken(owner.client, { name: "Private name" });
  const enabled = await readJson(await owner.client.post("/api/auth/two-factor/enable", { password: PASSWORD }));
  t.equal((await owner.client.post("/api/auth/two-factor/verify-totp", { code: totp(secretOf(enabled.totpURI)) })).status, 200);

  const { browser, answer } = await resetFromPage(owner.email);
  t.equal(answer.headers.get("location"), "/reset-password/done");
  t.notOk(
    answer.headers.getSetCookie().some((c) => c.startsWith("better-auth.recovery=")),
    "no recovery cookie",
  );
  const text = textOf(await (await browser.get("/reset-password/done")).text());
  t.match(text, "Sign in, then check your API tokens");
  t.notMatch(text, "Private name");
});
