/**
 * JSON-RPC batches on /mcp: MCP 2025-03-26 had them, 2025-06-18 removed them. A batch declared at a
 * version without batches is refused with JSON-RPC's Invalid Request; older versions (and requests
 * without the version header, which the spec reads as 2025-03-26) still get one answer per message.
 */
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { mintToken, newUser } from "../helpers/auth.js";

const { url } = await startTestApp(t);
const owner = await newUser(url, "batching");
const token = await mintToken(owner.client, { name: "mcp", scopes: ["host:call"] });
const batch = [
  { jsonrpc: "2.0", id: 1, method: "tools/list" },
  { jsonrpc: "2.0", id: 2, method: "ping" },
];

const post = (body: unknown, version?: string) =>
  fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(version ? { "mcp-protocol-version": version } : {}),
    },
    body: JSON.stringify(body),
  });

t.test("a batch at 2025-06-18 or later is refused as a JSON-RPC Invalid Request", async (t) => {
  for (const version of ["2025-06-18", "2025-11-25"]) {
    const response = await post(batch, version);
    t.equal(response.status, 400, version);
    t.same(await response.json(), {
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: `Invalid Request: MCP ${version} has no JSON-RPC batches; send each message in a request of its own` },
    });
  }
  const single = await post(batch[0], "2025-06-18");
  t.equal(single.status, 200, "one message at a time works at that version");
  t.match(await single.json(), { jsonrpc: "2.0", id: 1, result: { tools: Array } });
});

t.test("a batch at 2025-03-26, or without a version header, gets one answer per request", async (t) => {
  for (const version of ["2025-03-26", undefined]) {
    const response = await post(batch, version);
    t.equal(response.status, 200, String(version));
    const answers = (await response.json()) as Array<{ id: number }>;
    t.same(answers.map((answer) => answer.id).sort(), [1, 2]);
  }
});

t.test("an unauthenticated batch is still a 401 first", async (t) => {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify(batch),
  });
  t.equal(response.status, 401);
});
