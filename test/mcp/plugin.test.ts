import cookie from "@fastify/cookie";
import formbody from "@fastify/formbody";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import Fastify from "fastify";
import t from "tap";
import { dbPlugin } from "../../src/db/index.js";
import { errorHandlerPlugin, streamLimitsPlugin } from "../../src/http/index.js";
import { auditPlugin } from "../../src/plugins/activity/audit-plugin.js";
import { authPlugin, createAuth, originGuardPlugin } from "../../src/plugins/auth/index.js";
import { createDevice } from "../../src/plugins/host/devices.js";
import { hostPlugin } from "../../src/plugins/host/index.js";
import { mcpPlugin } from "../../src/plugins/mcp/index.js";
import * as store from "../../src/plugins/mcp/store.js";
import { sessionPlugin } from "../../src/plugins/session/index.js";
import { closeListening, freePort, TEST_SECRET } from "../helpers/app.js";
import { openTestDatabase } from "../helpers/database.js";
import { openTool, ScriptedDevice, statTool, writeTool } from "../host/helpers.js";
import { textOf } from "./helpers.js";

/** The MCP plugin alone on a bare Fastify(), with only the plugins it depends on (and no OAuth). */
const database = await openTestDatabase();
t.teardown(() => database.close());
const port = await freePort();
const url = `http://localhost:${port}`;
const auth = createAuth({ db: database.db, baseURL: url, secret: TEST_SECRET });

async function bareApp(withHost: boolean) {
  const app = Fastify();
  await app.register(errorHandlerPlugin);
  await app.register(cookie);
  await app.register(formbody);
  await app.register(dbPlugin, { db: database.db });
  await app.register(auditPlugin);
  await app.register(originGuardPlugin, { trustedOrigins: [url] });
  await app.register(authPlugin, { auth });
  await app.register(sessionPlugin);
  await app.register(streamLimitsPlugin);
  if (withHost) await app.register(hostPlugin);
  await app.register(mcpPlugin);
  return app;
}

t.test("it names what it needs: without the host plugin it refuses to load", async (t) => {
  const app = await bareApp(false).catch((error: Error) => error);
  t.match(app, { message: /tether-host/ });
});

t.test("alone, with its dependencies: token auth, device tools, the action switch", async (t) => {
  const app = await bareApp(true);
  await app.listen({ port, host: "127.0.0.1" });
  t.teardown(() => closeListening(app));

  const signUp = await auth.api.signUpEmail({ body: { name: "Bare", email: "bare@example.com", password: "correct horse battery" } });
  const userId = signUp.user.id;
  const { token } = await app.tetherApiTokens.create({ userId, name: "mcp", scopes: ["host:call"] });
  const paired = await createDevice(database.db, { userId, name: "scripted", platform: "test" });
  const device = new ScriptedDevice(url, paired.deviceId, paired.token);
  t.teardown(() => device.disconnect());
  t.equal((await device.hello([statTool, writeTool, openTool])).status, 200);
  await device.connect();
  device.serve((call) => ({ opened: call.input.path }));

  const metadata = (await (await fetch(`${url}/.well-known/oauth-protected-resource`)).json()) as { authorization_servers: string[] };
  t.same(metadata.authorization_servers, [], "no OAuth without the OAuth plugins: tokens only");
  t.equal((await fetch(`${url}/.well-known/oauth-authorization-server/api/auth`)).status, 404);

  const connect = async () => {
    const client = new Client({ name: "bare", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    t.teardown(() => client.close());
    return client;
  };
  const client = await connect();
  const names = (await client.listTools()).tools.map((tool) => tool.name);
  t.same(names, ["list_devices", "proposal_status", "stat", "write_file"], "open_path is off by default");

  await store.setAllowActions(database.db, userId, true);
  const allowed = await connect();
  const tools = (await allowed.listTools()).tools;
  t.match(
    tools.find((tool) => tool.name === "open_path"),
    { annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false } },
  );
  const opened = await allowed.callTool({ name: "open_path", arguments: { device: "scripted", path: "notes.txt" } });
  t.notOk(opened.isError);
  t.match(textOf(opened), /"opened": "notes.txt"/);

  // The notification stream (GET /mcp) ends when its token is revoked: the session is over.
  const stream = await fetch(`${url}/mcp`, { headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" } });
  t.equal(stream.status, 200);
  t.match(stream.headers.get("content-type"), /text\/event-stream/);
  const tokenId = (await app.tetherApiTokens.list(userId))[0]!.id;
  t.ok(await app.tetherApiTokens.revoke(userId, tokenId));
  const reader = stream.body!.getReader();
  const ended = await Promise.race([
    (async () => {
      while (!(await reader.read()).done);
      return true;
    })(),
    new Promise<false>((resolve) => setTimeout(() => resolve(false), 20_000).unref()),
  ]);
  t.ok(ended, "the stream closed after the revocation");
});
