/**
 * RFC 7009 through a strict third-party client (oauth4webapi): revoking a token answers 200 whether
 * the token is live, unknown, already revoked or expired (§2.2: the client cannot act on the
 * difference, and an error would tell it which tokens exist). Only the client's own failures (no
 * client id, an unknown client) are errors.
 */
import * as oauth from "oauth4webapi";
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { mintToken, newUser } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";

const { url, database } = await startTestApp(t, { redis: Boolean(process.env.TEST_REDIS_URL) });
const owner = await newUser(url, "revocation");
const insecure = { [oauth.allowInsecureRequests]: true } as const;
const issuer = new URL(`${url}/api/auth`);
const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: "oauth2", ...insecure }));
const REDIRECT = "http://127.0.0.1:9/callback";

/** A public client registered (RFC 7591), and a token set for it by the code flow with PKCE, all through oauth4webapi. */
async function clientWithTokens(): Promise<{ client: oauth.Client; tokens: oauth.TokenEndpointResponse }> {
  const registered = await readJson(
    await fetch(as.registration_endpoint!, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "Strict client",
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: "none",
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      }),
    }),
  );
  const client: oauth.Client = { client_id: registered.client_id, token_endpoint_auth_method: "none" };
  const verifier = oauth.generateRandomCodeVerifier();
  const authorize = new URL(as.authorization_endpoint!);
  authorize.search = new URLSearchParams({
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: REDIRECT,
    scope: "host:call offline_access",
    state: "s",
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    resource: `${url}/mcp`,
    prompt: "consent",
  }).toString();
  const consent = await readJson(await owner.client.get(authorize.pathname + authorize.search));
  const decided = await owner.client.request("POST", "/oauth/consent", { form: { decision: "allow", oauth_query: String(consent.url).split("?")[1]! } });
  const callback = new URL(decided.headers.get("location")!);
  const parameters = oauth.validateAuthResponse(as, client, callback, "s");
  const response = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), parameters, REDIRECT, verifier, {
    ...insecure,
    additionalParameters: { resource: `${url}/mcp` },
  });
  return { client, tokens: await oauth.processAuthorizationCodeResponse(as, client, response) };
}

const revoke = async (client: oauth.Client, token: string, hint?: string) =>
  oauth.processRevocationResponse(
    await oauth.revocationRequest(as, client, oauth.None(), token, { ...insecure, ...(hint ? { additionalParameters: { token_type_hint: hint } } : {}) }),
  );

t.test("the metadata names the revocation endpoint", async (t) => {
  t.equal(as.revocation_endpoint, `${url}/api/auth/oauth2/revoke`);
});

t.test("revoking live, unknown, already revoked and expired tokens all succeed for oauth4webapi", async (t) => {
  const { client, tokens } = await clientWithTokens();
  const mcp = (token: string) =>
    fetch(`${url}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
  t.equal((await mcp(tokens.access_token)).status, 200, "the access token works");

  const live = await oauth.revocationRequest(as, client, oauth.None(), tokens.access_token, insecure);
  const liveAnswer = { status: live.status, type: live.headers.get("content-type"), body: await live.text() };
  t.equal(liveAnswer.status, 200, "a live access token");
  t.equal((await mcp(tokens.access_token)).status, 401, "and it stops working");
  await t.resolves(revoke(client, tokens.access_token), "the same access token again (already revoked)");
  await t.resolves(revoke(client, tokens.access_token, "access_token"), "again, with the access_token hint");
  await t.resolves(revoke(client, tokens.refresh_token!, "refresh_token"), "a live refresh token");
  await t.resolves(revoke(client, tokens.refresh_token!, "refresh_token"), "the refresh token again (already revoked)");
  await t.resolves(revoke(client, tokens.refresh_token!), "the refresh token again, no hint");
  for (const hint of [undefined, "access_token", "refresh_token", "something_else"]) {
    await t.resolves(revoke(client, "an-unknown-token-" + "x".repeat(20), hint), `an unknown token (hint ${hint})`);
  }
  const unknown = await oauth.revocationRequest(as, client, oauth.None(), "an-unknown-token", insecure);
  t.same(
    { status: unknown.status, type: unknown.headers.get("content-type"), body: await unknown.text() },
    liveAnswer,
    "an unknown token's answer is the live token's, byte for byte",
  );
  await t.resolves(revoke(client, await mintToken(owner.client, { name: "not oauth" })), "an API token is not this server's OAuth token: 200 all the same");

  const expired = await clientWithTokens();
  await database.db
    .updateTable("oauthAccessToken" as never)
    .set({ expiresAt: new Date(Date.now() - 60_000) } as never)
    .execute();
  await t.resolves(revoke(expired.client, expired.tokens.access_token), "an expired access token");
});

t.test("a request without a usable client is still an error the client can read", async (t) => {
  const unknownClient = await oauth.revocationRequest(as, { client_id: "no-such-client" }, oauth.None(), "whatever", insecure);
  t.ok(unknownClient.status === 400 || unknownClient.status === 401, `an unknown client: ${unknownClient.status}`);
  t.match(await unknownClient.json(), { error: "invalid_client" });
  const noToken = await fetch(as.revocation_endpoint!, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: "client_id=x",
  });
  t.ok(noToken.status >= 400 && noToken.status < 500, `no token: ${noToken.status}`);
});
