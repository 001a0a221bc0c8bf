import { existsSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { chromium } from "playwright-core";
import t from "tap";
import { IN_CI } from "../helpers/database.js";
import { builtExecutable } from "../host/executable.js";

import { mcpWorld, textOf } from "./helpers.js";
import { readJson } from "../helpers/client.js";

/**
 * MCP's OAuth flow end to end: the SDK client discovers the authorization server from the 401, registers
 * itself, sends the owner (signed in, in Chromium) to the consent page, exchanges the code with PKCE,
 * and calls a tool with the token. Revoking the grant on the settings page ends its access.
 */
const CHROMIUM = "/usr/bin/chromium";
if (!existsSync(CHROMIUM)) {
  if (IN_CI) throw new Error(`${CHROMIUM} is missing`);
  t.plan(0, `skip: ${CHROMIUM} is missing`);
  process.exit(0);
}

const executable = await builtExecutable(t);
const world = await mcpWorld(t, executable, "oauth-box");
/** The client's redirect target: a real listener on loopback, as a desktop MCP client runs one. */
const callbacks: URL[] = [];
const listener = createServer((request, response) => {
  callbacks.push(new URL(request.url ?? "/", "http://127.0.0.1"));
  response.end("back in the client");
});
await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
t.teardown(() => listener.close());
const REDIRECT = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/callback`;

/** The SDK's client-side OAuth hooks, kept in memory; the "redirect" is recorded for the browser to follow. */
class MemoryProvider implements OAuthClientProvider {
  information: OAuthClientInformationMixed | undefined;
  stored: OAuthTokens | undefined;
  verifier = "";
  authorizationURL: URL | undefined;
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: "Test Agent 9000", redirect_uris: [REDIRECT], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation = () => this.information;
  saveClientInformation = (information: OAuthClientInformationMixed) => void (this.information = information);
  tokens = () => this.stored;
  saveTokens = (tokens: OAuthTokens) => void (this.stored = tokens);
  redirectToAuthorization = (url: URL) => void (this.authorizationURL = url);
  saveCodeVerifier = (verifier: string) => void (this.verifier = verifier);
  codeVerifier = () => this.verifier;
}

t.test("registration, consent in Chromium, token, a call; revoking the grant ends it", async (t) => {
  const provider = new MemoryProvider();
  const mcpURL = new URL("/mcp", world.url);
  await t.rejects(new Client({ name: "agent", version: "1" }).connect(new StreamableHTTPClientTransport(mcpURL, { authProvider: provider })), /Unauthorized/);
  t.ok(provider.information?.client_id, "the client registered itself (RFC 7591)");
  const authorization = provider.authorizationURL!;
  t.equal(authorization.origin + authorization.pathname, `${world.url}/api/auth/oauth2/authorize`);
  t.equal(authorization.searchParams.get("code_challenge_method"), "S256");
  t.equal(authorization.searchParams.get("resource"), mcpURL.href);

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
  t.teardown(() => browser.close());
  const context = await browser.newContext();
  const [name, value] = [...world.owner.cookies][0]!;
  await context.addCookies([{ name, value, url: world.url }]);
  const page = await context.newPage();
  await page.goto(authorization.href);
  t.match(new URL(page.url()).pathname, "/oauth/consent", `on the consent page (at ${page.url()})`);
  t.equal(await page.textContent("#client-name"), "Test Agent 9000", "the consent page names the client");
  t.match(await page.textContent("#requested-access"), /read files inside those folders, and propose changes/);
  await page.click("button[value=allow]");
  await page.waitForURL((url) => url.href.startsWith(REDIRECT));
  const callback = callbacks.find((url) => url.pathname === "/callback");
  t.ok(callback?.searchParams.get("code"), `the browser came back with a code (${callback})`);

  const transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  await transport.finishAuth(callback!.searchParams.get("code")!);
  t.ok(provider.stored?.access_token, "a token for the code and the PKCE verifier");
  const client = new Client({ name: "agent", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(mcpURL, { authProvider: provider }));
  t.teardown(() => client.close());
  const read = await client.callTool({ name: "read_file", arguments: { device: "oauth-box", path: "notes.txt" } });
  t.match(textOf(read), /first line/);
  await world.app.app.tetherAudit.flush(); // audit rows are written in batches, off the request path
  const rows = await world.app.database.db.selectFrom("host_audit").select(["credential", "tool"]).where("actor", "=", "mcp").execute();
  t.ok(rows.some((row) => row.credential === `oauth:${provider.information!.client_id}` && row.tool === "read_file"), "audited with the OAuth client");

  // The grant is listed on the settings page, and revoking it there refuses the client's next request.
  await page.goto(`${world.url}/settings/mcp`);
  t.match(await page.textContent("#grants"), /Test Agent 9000/);
  await page.click("#grants button");
  await page.waitForURL(/notice=revoked/);
  const refused = await fetch(mcpURL, {
    method: "POST",
    headers: { authorization: `Bearer ${provider.stored!.access_token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  t.equal(refused.status, 401);
  t.match(refused.headers.get("www-authenticate"), /error="invalid_token"/);
});

t.test("authorization-server metadata: PKCE, registration, the host:call scope", async (t) => {
  const metadata = await readJson(await fetch(`${world.url}/.well-known/oauth-authorization-server/api/auth`));
  t.match(metadata, {
    issuer: `${world.url}/api/auth`,
    registration_endpoint: `${world.url}/api/auth/oauth2/register`,
    code_challenge_methods_supported: ["S256"],
  });
  t.ok(metadata.scopes_supported.includes("host:call"));
  const resource = await readJson(await fetch(`${world.url}/.well-known/oauth-protected-resource/mcp`));
  t.same(resource.authorization_servers, [`${world.url}/api/auth`]);
});
