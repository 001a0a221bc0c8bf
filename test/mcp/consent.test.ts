/**
 * The OAuth consent page shows only an authorization request the provider signed: a query anyone can
 * write (another client's name, scopes it never asked for, an unchecked redirect URI) is a 400 and
 * never reaches the page or its Content-Security-Policy. Plain HTTP, no browser.
 */
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { newUser } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";

const { url } = await startTestApp(t);
const owner = await newUser(url, "consent-owner");
const html = { accept: "text/html" };
const REDIRECT = "http://127.0.0.1:9/callback";

/** Registers a public client (RFC 7591) and starts an authorization as the owner: the consent page's signed URL. */
async function consentURL(redirectURI = REDIRECT, name = "Agent X"): Promise<{ clientId: string; location: string }> {
  const registered = await fetch(`${url}/api/auth/oauth2/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: name,
      redirect_uris: [redirectURI],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code"],
      response_types: ["code"],
    }),
  });
  const client = await readJson(registered);
  if (registered.status !== 201) throw new Error(`register: ${registered.status} ${JSON.stringify(client)}`);
  const query = new URLSearchParams({
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: redirectURI,
    scope: "host:call",
    state: "s",
    code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
    code_challenge_method: "S256",
    resource: `${url}/mcp`,
  });
  const answer = await readJson(await owner.client.get(`/api/auth/oauth2/authorize?${query}`));
  if (!String(answer.url).startsWith("/oauth/consent?")) throw new Error(`authorize: ${JSON.stringify(answer)}`);
  return { clientId: client.client_id, location: answer.url };
}

t.test("a signed request is shown, and the decision goes back to the client", async (t) => {
  const { location } = await consentURL();
  const page = await owner.client.get(location, html);
  t.equal(page.status, 200);
  const body = await page.text();
  t.match(body, /Allow <span id="client-name">Agent X<\/span>/);
  t.match(body, /read files inside those folders/);
  t.match(page.headers.get("content-security-policy"), "form-action 'self' http://127.0.0.1:9;", "the checked redirect origin may receive the decision");
  const decided = await owner.client.request("POST", "/oauth/consent", { form: { decision: "allow", oauth_query: location.split("?")[1]! } });
  t.equal(decided.status, 303);
  t.match(decided.headers.get("location"), /^http:\/\/127\.0\.0\.1:9\/callback\?code=/);
});

t.test("a request the provider did not sign, or that was changed, is refused before anything is shown", async (t) => {
  const { clientId, location } = await consentURL(REDIRECT, "Agent Y");
  const forged = new URLSearchParams({ client_id: clientId, scope: "Delete every file you own", redirect_uri: "http://x;sandbox" });
  const changed = location.replace("scope=host%3Acall", "scope=offline_access");
  const extra = `${location}&ui_locales=${encodeURIComponent("https://evil.example/cb")}`;
  for (const [what, path] of [
    ["unsigned", `/oauth/consent?${forged}`],
    ["scope changed", changed],
    ["a parameter added", extra],
    ["no query", "/oauth/consent"],
  ] as const) {
    const page = await owner.client.get(path, html);
    t.equal(page.status, 400, what);
    const body = await page.text();
    t.match(body, "This authorization request expired or was changed", what);
    t.notMatch(body, /Delete every file|Agent Y/, `${what}: nothing from the query is shown`);
    t.notMatch(page.headers.get("content-security-policy"), /sandbox|evil|127\.0\.0\.1/, `${what}: nothing from the query is in the policy`);
  }
});

t.test("a registered redirect URI whose host would end the directive never reaches the policy", async (t) => {
  // The provider registers "https://a;sandbox/cb" (the URL parser accepts that host): the page must not
  // turn it into a `sandbox` directive.
  const { location } = await consentURL("https://a;sandbox/cb", "Agent Z");
  const page = await owner.client.get(location, html);
  t.equal(page.status, 200);
  const policy = page.headers.get("content-security-policy")!;
  t.notMatch(policy, /sandbox/);
  t.match(policy, "form-action 'self';");
});
