import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import * as oauth from "oauth4webapi";
import t, { type Test } from "tap";
import { signedIn, startHostServer } from "../host/helpers.js";
import { isPublicAddress } from "../../src/plugins/mcp/cimd-fetch.js";
import { connectV2 } from "./v2.js";

/**
 * Client ID Metadata Documents: an OAuth client whose client_id is the https URL of its metadata,
 * served here by a real HTTPS server on loopback (allowed by the app's configuration for this test,
 * with the test's own certificate authority), authorised by oauth4webapi through authorize, the owner's
 * consent, the token endpoint, and then a call to /mcp; and each way a document is refused, a 4xx.
 */
const dir = mkdtempSync(path.join(tmpdir(), "tether-cimd-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
execFileSync(
  "openssl",
  ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"].concat([
    "-addext",
    "subjectAltName=IP:127.0.0.1",
    "-keyout",
    path.join(dir, "key.pem"),
    "-out",
    path.join(dir, "cert.pem"),
  ]),
  { stdio: "ignore" },
);

const REDIRECT = "http://127.0.0.1:9/callback";
/** What the document server answers, by path: a body (JSON-encoded unless a string), headers, a status. */
const documents = new Map<string, { status?: number; body?: unknown; headers?: Record<string, string> }>();
const fetched = new Map<string, number>();
const metadataServer: Server = createServer(
  { key: readFileSync(path.join(dir, "key.pem")), cert: readFileSync(path.join(dir, "cert.pem")) },
  (request, response) => {
    const entry = documents.get(request.url ?? "");
    fetched.set(request.url ?? "", (fetched.get(request.url ?? "") ?? 0) + 1);
    if (!entry) return void response.writeHead(404).end();
    // A server that sends its head and then nothing: the fetch's deadline ends it.
    if (entry.status === 0) return void response.writeHead(200, { "content-type": "application/json" });
    const body = typeof entry.body === "string" ? entry.body : JSON.stringify(entry.body);
    response.writeHead(entry.status ?? 200, { "content-type": "application/json", ...entry.headers }).end(body);
  },
);
await new Promise<void>((resolve) => metadataServer.listen(0, "127.0.0.1", resolve));
t.teardown(() => new Promise<void>((resolve) => metadataServer.close(() => resolve()) && metadataServer.closeAllConnections()));
const origin = `https://127.0.0.1:${(metadataServer.address() as AddressInfo).port}`;

const app = await startHostServer(t, { env: { MCP_CIMD_ALLOW_HOSTS: "127.0.0.1", MCP_CIMD_CA_FILE: path.join(dir, "cert.pem") } });
const { url } = app;
const owner = await signedIn(url);
const insecure = { [oauth.allowInsecureRequests]: true } as const;
const issuer = new URL(`${url}/api/auth`);
const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: "oauth2", ...insecure }));

/** A well-formed document for the client at `documentPath`. */
function document(documentPath: string, extra: Record<string, unknown> = {}) {
  return {
    client_id: `${origin}${documentPath}`,
    client_name: "Document Agent",
    client_uri: origin,
    redirect_uris: [REDIRECT],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
    ...extra,
  };
}

/** The authorization request a client makes (PKCE, the /mcp resource), as the owner's browser sends it. */
async function authorize(clientId: string, redirectUri = REDIRECT) {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const target = new URL(as.authorization_endpoint!);
  for (const [name, value] of Object.entries({
    client_id: clientId,
    redirect_uri: redirectUri,
    response_type: "code",
    scope: "host:call",
    state,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    resource: `${url}/mcp`,
  }))
    target.searchParams.set(name, value);
  const response = await owner.request("GET", target.pathname + target.search);
  return { response, verifier, state };
}

t.test("the authorization server metadata says documents are supported; registration stays", async (t) => {
  t.equal(as.client_id_metadata_document_supported, true);
  t.ok(as.registration_endpoint, "dynamic registration stays for clients that use it");
});

/** oauth4webapi through the whole flow for the client at `clientId`: authorize, the owner's consent (checked by `t`), the token. */
async function authorisedTokens(t: Test, clientId: string): Promise<oauth.TokenEndpointResponse> {
  const client: oauth.Client = { client_id: clientId };
  const { response, verifier, state } = await authorize(clientId);
  const consentAt = new URL(response.status === 200 ? ((await response.json()) as { url: string }).url : response.headers.get("location")!, url);
  t.equal(consentAt.pathname, "/oauth/consent");
  const page = await owner.get(consentAt.pathname + consentAt.search);
  t.match(await page.text(), /Document Agent/, "the consent page names the client as its document does");
  const consented = await owner.request("POST", "/oauth/consent", { form: { decision: "allow", oauth_query: consentAt.search.slice(1) } });
  t.equal(consented.status, 303);
  const params = oauth.validateAuthResponse(as, client, new URL(consented.headers.get("location")!), state);
  const grant = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, REDIRECT, verifier, {
    additionalParameters: { resource: `${url}/mcp` },
    ...insecure,
  });
  return oauth.processAuthorizationCodeResponse(as, client, grant);
}

t.test("oauth4webapi with a document client: authorize, consent, token, then /mcp", async (t) => {
  documents.set("/agent.json", { body: document("/agent.json"), headers: { "cache-control": "max-age=300" } });
  const tokens = await authorisedTokens(t, `${origin}/agent.json`);
  t.match(tokens, { token_type: /bearer/i, scope: /host:call/ });
  const mcp = await connectV2(t, url, tokens.access_token, "2026-07-28");
  const { tools } = await mcp.listTools();
  t.ok(
    tools.some((tool) => tool.name === "list_devices"),
    "the token works on /mcp",
  );
  t.equal(fetched.get("/agent.json"), 1, "fetched once: the document's max-age covers every later look-up");
});

t.test("a known client whose site goes down keeps working; a new authorization needs the document", async (t) => {
  documents.set("/flaky.json", { body: document("/flaky.json"), headers: { "cache-control": "max-age=0" } });
  const tokens = await authorisedTokens(t, `${origin}/flaky.json`);
  documents.set("/flaky.json", { status: 500, body: {} });
  const before = fetched.get("/flaky.json") ?? 0;
  const mcp = await connectV2(t, url, tokens.access_token, "2026-07-28");
  t.ok((await mcp.listTools()).tools.length > 0, "the token still works while the document cannot be fetched");
  t.equal(fetched.get("/flaky.json"), before + 1, "asked once, then left alone for a minute");
  const { response } = await authorize(`${origin}/flaky.json`);
  t.equal(response.status, 400);
  t.match(await response.text(), /HTTP 500/);
});

t.test("refusals: each a 4xx that names the problem, never a 500, and never a redirect to the client", async (t) => {
  const big = document("/big.json", { client_name: "x".repeat(6 * 1024) });
  documents.set("/mismatch.json", { body: document("/other.json") });
  documents.set("/big.json", { body: big });
  documents.set("/moved.json", { status: 302, headers: { location: "/agent.json" } });
  documents.set("/unlisted.json", { body: document("/unlisted.json") });
  documents.set("/secret.json", { body: document("/secret.json", { token_endpoint_auth_method: "client_secret_basic", client_secret: "s" }) });
  documents.set("/text.json", { body: "not json at all" });
  documents.set("/stall.json", { status: 0 });
  const cases: Array<[string, string, RegExp, string?]> = [
    ["mismatched client_id", `${origin}/mismatch.json`, /client_id is not the URL/],
    ["oversized document", `${origin}/big.json`, /larger than 5120 bytes/],
    ["a redirect", `${origin}/moved.json`, /redirect/],
    ["redirect_uri not listed", `${origin}/unlisted.json`, /redirect_uri/i, "http://127.0.0.1:9/elsewhere"],
    ["a secret in the document", `${origin}/secret.json`, /must not contain \\?"client_secret/],
    ["not JSON", `${origin}/text.json`, /not valid JSON/],
    ["a server that stalls", `${origin}/stall.json`, /timed out after 5000 ms/],
    ["a private address not allowed", "https://10.20.30.40/client.json", /private, loopback or reserved/],
    ["loopback not allowed", "https://127.0.0.2/client.json", /private, loopback or reserved/],
    ["localhost by name", `https://localhost:${new URL(origin).port}/client.json`, /private, loopback or reserved/],
    ["no path", origin, /https URL with a path/],
    ["non-https", `http://127.0.0.1:${new URL(origin).port}/agent.json`, /client/i],
  ];
  for (const [what, clientId, problem, redirectUri] of cases) {
    const { response } = await authorize(clientId, redirectUri);
    const text = await response.text();
    t.ok(response.status >= 400 && response.status < 500, `${what}: ${response.status} ${text}`);
    t.match(text, problem, what);
  }
});

t.test("without the test's allowance, the same loopback server is refused before any request reaches it", async (t) => {
  const strict = await startHostServer(t, { env: { MCP_CIMD_CA_FILE: path.join(dir, "cert.pem") } });
  documents.set("/strict.json", { body: document("/strict.json") });
  const query = new URLSearchParams({ client_id: `${origin}/strict.json`, redirect_uri: REDIRECT, response_type: "code", code_challenge: "x".repeat(43) });
  const response = await fetch(`${strict.url}/api/auth/oauth2/authorize?${query}`);
  t.equal(response.status, 400);
  t.match(await response.text(), /private, loopback or reserved/);
  t.notOk(fetched.has("/strict.json"), "the document server was never asked");
});

t.test("no-store: the document is fetched again for the next authorization", async (t) => {
  documents.set("/fresh.json", { body: document("/fresh.json"), headers: { "cache-control": "no-store" } });
  for (let i = 0; i < 2; i++) {
    const { response } = await authorize(`${origin}/fresh.json`);
    t.ok(response.status === 200 || response.status === 302, `authorize ${i}: ${response.status}`);
  }
  t.equal(fetched.get("/fresh.json"), 2);
});

t.test("the address check: public addresses pass, every special-purpose range is refused", async (t) => {
  for (const address of ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "2001:4860:4860::8888"]) t.ok(isPublicAddress(address), address);
  for (const address of [
    "127.0.0.1",
    "10.0.0.1",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "198.18.0.1",
    "224.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "64:ff9b::a00:1",
    "2002:a00:1::1",
    "2001::1",
    "2001:db8::1",
    "ff02::1",
    "not-an-address",
  ])
    t.notOk(isPublicAddress(address), address);
});
