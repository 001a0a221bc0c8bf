/**
 * `/mcp` is rate-limited per credential in production, as the auth API is per address: past
 * `MCP_RATE_LIMIT` requests in `MCP_RATE_LIMIT_WINDOW_SECONDS` the credential's requests (and its
 * notification streams) get 429 `RATE_LIMITED` with `Retry-After`; the same user's other token, and
 * other users, are not affected. With Redis the count spans replicas. Outside production: no limit.
 */
import t from "tap";
import { startTestApp, TEST_SECRET } from "../helpers/app.js";
import { bearer, mintToken, newUser, redisTest } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";
import { openTestDatabase } from "../helpers/database.js";
import { streamOpener } from "../helpers/streams.js";

const database = await openTestDatabase();
t.teardown(() => database.close());

const LIMIT = 5;
const PRODUCTION = { NODE_ENV: "production", BETTER_AUTH_SECRET: TEST_SECRET, MCP_RATE_LIMIT: String(LIMIT) };

const listTools = (url: string, token: string) =>
  fetch(`${url}/mcp`, {
    method: "POST",
    headers: { ...bearer(token), "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });

async function statuses(count: number, next: () => Promise<Response>): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < count; i++) {
    const response = await next();
    await response.arrayBuffer();
    seen.push(response.status);
  }
  return seen;
}

t.test("production: one token past the limit gets 429 with Retry-After; its other token and other users do not", async (t) => {
  const { url } = await startTestApp(t, { database, env: PRODUCTION });
  const open = streamOpener(t, url);
  const user = await newUser(url, "mcp-flood");
  const [flooding, spare] = [await mintToken(user.client, { scopes: ["host:call"] }), await mintToken(user.client, { scopes: ["host:call"] })];

  t.same(await statuses(LIMIT, () => listTools(url, flooding)), Array(LIMIT).fill(200), "within the limit");
  const limited = await listTools(url, flooding);
  t.equal(limited.status, 429, "past it: 429");
  const retryAfter = Number(limited.headers.get("retry-after"));
  t.ok(retryAfter > 0 && retryAfter <= 60, `Retry-After within the window (${retryAfter} s)`);
  t.match(await readJson(limited), { code: "RATE_LIMITED", message: /Too many requests to \/mcp/ }, "{ code, message }, not a JSON-RPC error");
  const stream = await open("/mcp", bearer(flooding));
  t.match(stream, { status: 429, body: { code: "RATE_LIMITED" } }, "its notification streams count too");

  t.equal((await listTools(url, spare)).status, 200, "the same user's other token is counted apart");
  const other = await newUser(url, "mcp-calm");
  t.equal((await listTools(url, await mintToken(other.client, { scopes: ["host:call"] }))).status, 200, "another user is not affected");
});

t.test("outside production there is no /mcp rate limit", async (t) => {
  const { url } = await startTestApp(t, { database, env: { NODE_ENV: "development", MCP_RATE_LIMIT: String(LIMIT) } });
  const user = await newUser(url, "mcp-dev");
  const token = await mintToken(user.client, { scopes: ["host:call"] });
  t.same(await statuses(LIMIT * 2, () => listTools(url, token)), Array(LIMIT * 2).fill(200));
});

redisTest(t, "production with Redis: a token's requests count on every replica", async (t) => {
  const a = await startTestApp(t, { database, redis: true, env: PRODUCTION });
  const b = await startTestApp(t, { database, redis: true, env: PRODUCTION });
  const user = await newUser(a.url, "mcp-replicas");
  const token = await mintToken(user.client, { scopes: ["host:call"] });
  t.same(await statuses(3, () => listTools(a.url, token)), [200, 200, 200]);
  t.same(await statuses(2, () => listTools(b.url, token)), [200, 200]);
  t.equal((await listTools(a.url, token)).status, 429, "the sixth, across both, is refused");
  t.equal((await listTools(b.url, token)).status, 429);
});
