import t from "tap";
import { mcpOAuthPlugins } from "../../src/plugins/mcp/oauth.js";
import { mcpPages, mcpPublicPages } from "../../src/plugins/mcp/pages.js";
import * as store from "../../src/plugins/mcp/store.js";
import { testFetch } from "../helpers/inject.js";
import { alone, aloneBehindGuard, refusesWithout, showsPage, signedUp } from "./bare.js";

const withOAuth = { authPlugins: (url: string) => mcpOAuthPlugins({ resourceURL: `${url}/mcp` }) };

t.test("mcpPages declares the form parser its forms post through", (t) => refusesWithout(t, mcpPages, "@fastify/formbody"));
t.test("mcpPublicPages declares the renderer it draws with", (t) => refusesWithout(t, mcpPublicPages, "tether-page-render"));

t.test("mcpPages alone behind the guard: the MCP settings page turns action tools on", async (t) => {
  const { db, url } = await aloneBehindGuard(t, mcpPages, withOAuth);
  const owner = await signedUp(url, "mcp");
  t.match(await showsPage(t, owner, "/settings/mcp", "MCP"), `${url}/mcp`, "the page names the endpoint to give a client");
  const saved = await owner.request("POST", "/settings/mcp/actions", { form: { allowActions: "on" } });
  t.equal(saved.status, 303);
  t.equal(saved.headers.get("location"), "/settings/mcp?notice=saved");
  t.equal(await store.allowsActions(db, owner.userId), true);
  const unknown = await owner.get("/oauth/consent?client_id=nobody");
  t.equal(unknown.status, 400, "consent for a client nobody registered is refused");
});

t.test("mcpPublicPages alone: the sign-in stop on the way to authorizing a client", async (t) => {
  const { url } = await alone(t, mcpPublicPages);
  const page = await testFetch(`${url}/oauth/sign-in?client_id=abc&scope=host%3Acall&sig=secret&prompt=login`, { headers: { accept: "text/html" } });
  t.equal(page.status, 200);
  const html = await page.text();
  t.match(html, "<h1>Sign in to continue</h1>");
  t.notMatch(html, "sig=secret", "without the provider's signature parameters");
  t.match(html, 'href="/login?next=%2Fapi%2Fauth%2Foauth2%2Fauthorize%3Fclient_id%3Dabc%26scope%3Dhost%253Acall"', "signing in continues to the same request");
});
