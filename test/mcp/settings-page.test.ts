/**
 * /settings/mcp connects an agent: copy-paste configuration for common MCP clients with this server's address
 * filled in (an HTTP transport entry, an mcp-remote stdio entry, Claude Code's command), and connected OAuth
 * clients that share a name told apart by client id, redirect host, registration and last use, with dates
 * written as on every other page.
 */
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { uniqueEmail } from "../helpers/client.js";
import { authoriseClient } from "../helpers/oauth.js";
import { browserClient, textOf } from "../pages/support.js";
import { clientConfigurations } from "../../src/plugins/mcp/grant-details.js";
import { format } from "../../src/web/render.js";

/** The text of the copy block `id`, as a browser would copy it. */
function block(html: string, id: string): string {
  const raw = new RegExp(`<textarea id="${id}"[^>]*>([\\s\\S]*?)</textarea>`).exec(html)?.[1];
  if (raw === undefined) throw new Error(`no block #${id}`);
  return raw
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");
}

t.test("configuration for MCP clients, with this server's address, ready to paste", async (t) => {
  const server = await startTestApp(t);
  const owner = browserClient(server.url);
  await owner.signUp(uniqueEmail("mcp-settings"));
  const html = await (await owner.get("/settings/mcp")).text();
  const endpoint = `${server.url}/mcp`;
  t.same(JSON.parse(block(html, "mcp-config-http")), { mcpServers: { tether: { type: "http", url: endpoint } } }, "the HTTP transport entry");
  t.same(
    JSON.parse(block(html, "mcp-config-stdio")),
    { mcpServers: { tether: { command: "npx", args: ["-y", "mcp-remote", endpoint] } } },
    "the mcp-remote entry",
  );
  t.equal(block(html, "mcp-config-claude-code"), `claude mcp add --transport http tether ${endpoint}`);
  t.match(html, 'data-copy-target="#mcp-config-http"', "each with a copy button");
  t.same(
    JSON.parse(clientConfigurations("http://tether.lan:3000/mcp")[1]!.text).mcpServers.tether.args,
    ["-y", "mcp-remote", "http://tether.lan:3000/mcp", "--allow-http"],
    "mcp-remote is told plain http is meant when the server is not on this machine",
  );
});

t.test("two clients with the same name are told apart: client id, redirect host, registered, allowed, last used", async (t) => {
  const server = await startTestApp(t);
  const owner = browserClient(server.url);
  await owner.signUp(uniqueEmail("mcp-settings"));
  const first = await authoriseClient(server.url, owner, "Claude");
  const second = await authoriseClient(server.url, owner, "Claude");
  const html = await (await owner.get("/settings/mcp")).text();
  const text = textOf(html);
  t.equal(text.match(/Claude \(/g)?.length, 2, "both are listed");
  for (const client of [first, second]) t.match(text, `Client id ${client.clientId} Redirects to 127.0.0.1:9 Registered `);
  t.notMatch(text, /Last used never/, "each has used its grant (its token)");
  t.match(text, /Allowed \d{1,2} \w{3} \d{4}, \d{2}:\d{2} UTC/, "dates as every page writes them");
  t.equal(format.dateTime(new Date("2026-11-26T21:05:00Z")), "26 Nov 2026, 21:05 UTC", "the one format");
});
