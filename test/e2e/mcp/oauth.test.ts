import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import t from "tap";
import { chromiumAvailable, launchChromium, pageSignedIn } from "../browser/support.js";
import { builtExecutable } from "../../host/executable.js";

import { mcpWorld, textOf } from "../../mcp/helpers.js";
import { readJson } from "../../helpers/client.js";

/**
 * MCP's OAuth flow end to end: the SDK client discovers the authorization server from the 401, registers
 * itself, sends the owner (signed in, in Chromium) to the consent page, exchanges the code with PKCE,
 * and calls a tool with the token. Revoking the grant on the settings page ends its access.
 */
if (!chromiumAvailable(t)) process.exit(0);

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
    return {
      client_name: "Test Agent 9000",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
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

  const page = await pageSignedIn(await launchChromium(t), world.url, world.owner.cookies);
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
  const rows = await world.app.database.db.selectFrom("activity_event").select(["credential", "tool"]).where("actor", "=", "mcp").execute();
  t.ok(
    rows.some((row) => row.credential === `oauth:${provider.information!.client_id}` && row.tool === "read_file"),
    "audited with the OAuth client",
  );
  const activity = (await readJson(await world.owner.get("/api/activity?limit=100"))).entries as Array<{ tool: string | null; credentialName: string | null }>;
  t.ok(
    activity.some((entry) => entry.tool === "read_file" && entry.credentialName === "Test Agent 9000"),
    "the activity names the OAuth client",
  );
  const proposed = await client.callTool({ name: "write_file", arguments: { device: "oauth-box", path: "notes.txt", content: "by the agent\n" } });
  const { proposalId } = proposed.structuredContent as { proposalId: string };
  t.match(
    await readJson(await world.owner.get(`/api/host/proposals/${proposalId}`)),
    { proposer: { actor: "mcp", name: "Test Agent 9000" } },
    "the proposal names the OAuth client",
  );
  t.match(await (await world.owner.get(`/devices/proposals/${proposalId}`)).text(), /<dd>OAuth client “Test Agent 9000”<\/dd>/);

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

t.test("the owner gives a client read-only access on the consent page: it neither lists nor calls other tools", async (t) => {
  const provider = new MemoryProvider();
  const mcpURL = new URL("/mcp", world.url);
  await t.rejects(new Client({ name: "agent", version: "1" }).connect(new StreamableHTTPClientTransport(mcpURL, { authProvider: provider })), /Unauthorized/);
  const authorization = provider.authorizationURL!;
  t.same(authorization.searchParams.get("scope")?.split(" ").sort(), ["host:call", "host:read"], "the client asks for both scopes the resource lists");

  const page = await pageSignedIn(await launchChromium(t), world.url, world.owner.cookies);
  await page.goto(authorization.href);
  t.match(await page.textContent("#access-choice"), /Read only: list your devices and read files/);
  await page.check("input[name=access][value=read]");
  callbacks.length = 0;
  await page.click("button[value=allow]");
  await page.waitForURL((url) => url.href.startsWith(REDIRECT));
  const code = callbacks.find((url) => url.pathname === "/callback")!.searchParams.get("code")!;
  await new StreamableHTTPClientTransport(mcpURL, { authProvider: provider }).finishAuth(code);
  t.equal(provider.stored?.scope, "host:read", "the token carries only what the owner chose");

  const client = new Client({ name: "agent", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(mcpURL, { authProvider: provider }));
  t.teardown(() => client.close());
  const { tools } = await client.listTools();
  t.notOk(
    tools.some((tool) => tool.name === "write_file" || tool.name === "proposal_status"),
    "no tool that changes anything is listed",
  );
  t.ok(tools.some((tool) => tool.name === "read_file"));
  const write = await client.callTool({ name: "write_file", arguments: { device: "oauth-box", path: "notes.txt", content: "no\n" } });
  t.match(write, { isError: true, structuredContent: { code: "UNKNOWN_TOOL" } }, "nor callable");
  const read = await client.callTool({ name: "read_file", arguments: { device: "oauth-box", path: "notes.txt" } });
  t.match(textOf(read), /first line/);
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
  t.same(resource.scopes_supported, ["host:call", "host:read"], "the resource lists both host scopes (a client may register for either)");
});
