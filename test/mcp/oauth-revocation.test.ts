/**
 * What ends an MCP client's OAuth access, over real HTTP with a client authorised the way a real one
 * is (test/helpers/oauth.ts): a password reset (every grant: consents, access and refresh tokens),
 * signing out everywhere (every token; consents stay), the owner's revoke button and better-auth's
 * delete-consent endpoint (that client). Signing out one session does not. Consents given and
 * revoked are in the activity log with the client's name.
 */
import t, { type Test } from "tap";
import { mcpOAuthApi } from "../../src/plugins/mcp/oauth.js";
import { startTestApp } from "../helpers/app.js";
import { latestResetToken, newUser, PASSWORD } from "../helpers/auth.js";
import { eventually } from "../helpers/eventually.js";
import { readJson, TestClient } from "../helpers/client.js";
import { authoriseClient, callMcp, refreshed, refreshTokens, type OAuthClientTokens } from "../helpers/oauth.js";
import { textOf } from "../pages/support.js";

const { app, url } = await startTestApp(t);
const grantsOf = (userId: string) => mcpOAuthApi(app.tetherAuth).mcpOAuthGrants({ body: { userId } });

/** Whether /mcp takes the client's access token (the refresh token is left unspent). */
async function works(client: OAuthClientTokens): Promise<boolean> {
  return (await callMcp(url, client.accessToken)).status === 200;
}

/** Asserts that the client has lost everything: /mcp refuses its access token, its refresh token mints nothing. */
async function assertCutOff(t: Test, client: OAuthClientTokens, what: string) {
  const refused = await callMcp(url, client.accessToken);
  t.equal(refused.status, 401, `${what}: /mcp refuses the access token at once`);
  t.match(refused.headers.get("www-authenticate"), /error="invalid_token"/);
  const refreshed = await refreshTokens(url, client);
  t.equal(refreshed.status, 400, `${what}: the refresh token mints no new access token`);
  t.equal((await readJson(refreshed)).error, "invalid_grant");
}

async function resetToken(email: string): Promise<string> {
  const requested = await new TestClient(url).post("/api/auth/request-password-reset", { email, redirectTo: "/reset-password" });
  if (requested.status !== 200) throw new Error(`request-password-reset: ${requested.status}`);
  return latestResetToken(app.tetherDb);
}

/**
 * The intruder's way: sign in, let a client in, sign out again. better-auth's provider ends the access
 * tokens of a session that ends, but the refresh token (offline_access) carries on and mints access
 * tokens bound to no session, which nothing touched before this change.
 */
async function intrudersClient(email: string, password: string, name: string): Promise<OAuthClientTokens> {
  const intruder = new TestClient(url);
  if ((await intruder.signIn(email, password)).status !== 200) throw new Error("intruder sign-in");
  const client = await authoriseClient(url, intruder, name);
  if ((await intruder.post("/api/auth/sign-out")).status !== 200) throw new Error("intruder sign-out");
  return refreshed(url, client);
}

async function activityOf(client: TestClient): Promise<Array<{ event: string; actor: string; detail: Record<string, unknown> | null }>> {
  await app.tetherActivity.flush();
  const response = await client.get("/api/activity?limit=100");
  if (response.status !== 200) throw new Error(`activity: ${response.status}`);
  return (await readJson(response)).entries;
}

t.test("a password reset (JSON API) ends every grant: access token refused at once, refresh token dead, consent gone", async (t) => {
  const owner = await newUser(url, "reset-api");
  const intruder = await intrudersClient(owner.email, PASSWORD, "Intruder Agent 7");
  t.ok(await works(intruder), "the intruder's client works before the reset, signed out or not");
  t.equal((await grantsOf(owner.id)).length, 1);
  // Its notification stream: re-checked every minute, and at once when the owner's credentials change.
  const stream = await fetch(`${url}/mcp`, { headers: { authorization: `Bearer ${intruder.accessToken}`, accept: "text/event-stream" } });
  t.equal(stream.status, 200);
  let streamEnded = false;
  void (async () => {
    const reader = stream.body!.getReader();
    while (!(await reader.read()).done);
    streamEnded = true;
  })().catch(() => (streamEnded = true));

  const reset = await new TestClient(url).post("/api/auth/reset-password", { token: await resetToken(owner.email), newPassword: "the owner's new password" });
  t.equal(reset.status, 200);
  await assertCutOff(t, intruder, "after the reset");
  await eventually(() => streamEnded, 10_000, "the client's open notification stream to close");
  t.same(await grantsOf(owner.id), [], "the consent is gone: the client must ask again");

  const owner2 = new TestClient(url);
  t.equal((await owner2.signIn(owner.email, "the owner's new password")).status, 200);
  const events = await activityOf(owner2);
  const revoked = events.find((e) => e.event === "oauth.revoke");
  t.match(
    revoked,
    { actor: "visitor", detail: { client: "Intruder Agent 7", clientId: intruder.clientId, reason: "password-reset" } },
    "the revocation names the client",
  );
});

t.test("signing out everywhere ends access and refresh tokens alike; the consent stays", async (t) => {
  const owner = await newUser(url, "everywhere");
  const viaPage = await intrudersClient(owner.email, PASSWORD, "Agent Of Yesterday");
  t.ok(await works(viaPage));
  const signedOut = await owner.client.request("POST", "/settings/sessions/revoke-others", { headers: { accept: "text/html" } });
  t.equal(signedOut.status, 303);
  await assertCutOff(t, viaPage, "sign out all other sessions (the sessions page)");
  t.same(
    (await grantsOf(owner.id)).map((grant) => grant.name),
    ["Agent Of Yesterday"],
    "the consent stays: one sign-in gets new tokens",
  );

  const viaApi = await intrudersClient(owner.email, PASSWORD, "Agent Two");
  t.ok(await works(viaApi));
  t.equal((await owner.client.post("/api/auth/revoke-sessions")).status, 200);
  await assertCutOff(t, viaApi, "revoke-sessions (JSON API)");

  const again = new TestClient(url);
  t.equal((await again.signIn(owner.email)).status, 200);
  const viaPasswordChange = await intrudersClient(owner.email, PASSWORD, "Agent Three");
  const changed = await again.post("/api/auth/change-password", { currentPassword: PASSWORD, newPassword: "a newer passphrase", revokeOtherSessions: true });
  t.equal(changed.status, 200);
  await assertCutOff(t, viaPasswordChange, "a password change that signs out the other sessions");

  const admin = await newUser(url, "admin", { adminOf: app });
  const viaAdmin = await intrudersClient(owner.email, "a newer passphrase", "Agent Four");
  const byAdmin = await admin.client.request("POST", `/admin/users/${owner.id}/revoke-sessions`, { headers: { accept: "text/html" } });
  t.equal(byAdmin.status, 303);
  await assertCutOff(t, viaAdmin, "a site admin signing the user out everywhere");
});

t.test("signing out one session: that session's access tokens end (the provider's rule), the client carries on by its refresh token", async (t) => {
  const owner = await newUser(url, "one-session");
  const browser = new TestClient(url);
  t.equal((await browser.signIn(owner.email)).status, 200);
  const client = await authoriseClient(url, browser, "Desktop Agent");
  t.equal((await browser.post("/api/auth/sign-out")).status, 200);
  t.equal((await callMcp(url, client.accessToken)).status, 401, "the session's access token ended with it");
  t.ok(await works(await refreshed(url, client)), "the refresh token (offline_access) still mints a working one");
  t.equal((await grantsOf(owner.id)).length, 1, "the consent stays");
});

t.test("consents given and revoked are in the activity log, with the client's name", async (t) => {
  const owner = await newUser(url, "consents");
  const byButton = await authoriseClient(url, owner.client, "Button Agent");
  const revoke = await owner.client.request("POST", `/settings/mcp/grants/${encodeURIComponent(byButton.clientId)}/revoke`, {
    headers: { accept: "text/html" },
  });
  t.equal(revoke.status, 303);
  t.equal((await callMcp(url, byButton.accessToken)).status, 401);

  // better-auth's own endpoint deletes a consent; the client's tokens end with it.
  const byApi = await authoriseClient(url, owner.client, "Api Agent");
  const consents = await readJson(await owner.client.get("/api/auth/oauth2/get-consents"));
  const consent = consents.find((c: { clientId: string }) => c.clientId === byApi.clientId);
  t.equal((await owner.client.post("/api/auth/oauth2/delete-consent", { id: consent.id })).status, 200);
  await assertCutOff(t, byApi, "delete-consent");

  const events = await activityOf(owner.client);
  const of = (event: string, client: string) => events.find((e) => e.event === event && e.detail?.client === client);
  t.match(of("oauth.consent", "Button Agent"), { actor: "session", detail: { clientId: byButton.clientId, scopes: "host:call offline_access" } });
  t.match(of("oauth.revoke", "Button Agent"), { actor: "session", detail: { reason: "owner" } });
  t.ok(of("oauth.consent", "Api Agent"));
  t.match(of("oauth.revoke", "Api Agent"), { detail: { reason: "owner" } });

  const page = textOf(await (await owner.client.get("/settings/activity", { accept: "text/html" })).text());
  t.match(page, /OAuth client allowed client “Button Agent”/, "the activity page names the client");
  t.match(page, /OAuth client's access revoked client “Api Agent”/);
});
