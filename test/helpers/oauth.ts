import { createHash, randomBytes } from "node:crypto";
import type { TestClient } from "./client.js";

/** Where the client says it listens; never contacted (the test reads the redirect's Location). */
const REDIRECT = "http://127.0.0.1:9/callback";

export interface OAuthClientTokens {
  clientId: string;
  accessToken: string;
  refreshToken: string;
}

async function json(response: Response, what: string): Promise<any> {
  const text = await response.text();
  if (!response.ok) throw new Error(`${what}: ${response.status} ${text}`);
  return JSON.parse(text);
}

/**
 * An MCP client authorised over plain HTTP the way a real one is (RFC 7591 registration, the
 * authorization request with PKCE and the /mcp resource, the owner's consent on the consent page, the
 * code exchanged for tokens), by the browser session in `owner`'s cookie jar. `consentFields` are more of
 * the consent form's fields (e.g. `devices`).
 */
export async function authoriseClient(url: string, owner: TestClient, name: string, consentFields: Record<string, string> = {}): Promise<OAuthClientTokens> {
  const registered = await json(
    await fetch(`${url}/api/auth/oauth2/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: name,
        redirect_uris: [REDIRECT],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      }),
    }),
    "register",
  );
  const clientId = registered.client_id as string;
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const resource = `${url}/mcp`;
  const query = new URLSearchParams({
    response_type: "code",
    client_id: clientId,
    redirect_uri: REDIRECT,
    scope: "host:call offline_access",
    state: randomBytes(8).toString("hex"),
    code_challenge: challenge,
    code_challenge_method: "S256",
    resource,
  });
  // better-auth answers a request that is not a navigation with the redirect as JSON.
  const authorize = await owner.request("GET", `/api/auth/oauth2/authorize?${query}`);
  const target = authorize.status === 200 ? (await json(authorize, "authorize")).url : authorize.headers.get("location");
  const consentAt = new URL(target ?? "", url);
  if (consentAt.pathname !== "/oauth/consent") throw new Error(`authorize: ${authorize.status} to ${consentAt}`);
  const consented = await owner.request("POST", "/oauth/consent", { form: { decision: "allow", oauth_query: consentAt.search.slice(1), ...consentFields } });
  const back = new URL(consented.headers.get("location") ?? "", url);
  const code = back.searchParams.get("code");
  if (consented.status !== 303 || !code) throw new Error(`consent: ${consented.status} to ${back}`);
  const tokens = await json(
    await fetch(`${url}/api/auth/oauth2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier, resource }),
    }),
    "token",
  );
  if (typeof tokens.refresh_token !== "string") throw new Error(`no refresh token: ${JSON.stringify(tokens)}`);
  return { clientId, accessToken: tokens.access_token, refreshToken: tokens.refresh_token };
}

/** The client's refresh grant: the token endpoint's answer (200 with new tokens, or 400 `invalid_grant`). */
export function refreshTokens(url: string, client: OAuthClientTokens): Promise<Response> {
  return fetch(`${url}/api/auth/oauth2/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: client.refreshToken, client_id: client.clientId, resource: `${url}/mcp` }),
  });
}

/** A `tools/list` call to /mcp with the access token: the response (200, or 401 when it no longer works). */
export function callMcp(url: string, accessToken: string): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
}

/** Spends the refresh token for new tokens (refresh tokens rotate): the client as it is afterwards. */
export async function refreshed(url: string, client: OAuthClientTokens): Promise<OAuthClientTokens> {
  const tokens = await json(await refreshTokens(url, client), "refresh");
  return { clientId: client.clientId, accessToken: tokens.access_token, refreshToken: tokens.refresh_token };
}
