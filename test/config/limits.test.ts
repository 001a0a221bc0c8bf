import { readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { DEFAULT_LIMITS, loadConfig } from "../../src/config/env.js";

t.test("server limits come from the environment, with documented defaults", async (t) => {
  t.strictSame(loadConfig({}).limits, DEFAULT_LIMITS, "unset: the defaults");
  // The defaults an operator reads in docs/operations.md are the ones the server uses: each table row
  // `| `NAME` | `number` |` that names a limit (REQUEST_TIMEOUT_MS: requestTimeoutMs) against DEFAULT_LIMITS.
  const limitOf = (name: string) => name.toLowerCase().replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
  const guide = readFileSync(path.join(import.meta.dirname, "../../docs/operations.md"), "utf8");
  const documented = [...guide.matchAll(/^\| `([A-Z_]+)` +\| `(\d+)` +\|/gm)]
    .map(([, name, value]) => ({ name: name!, limit: limitOf(name!), value: Number(value) }))
    .filter(({ limit }) => limit in DEFAULT_LIMITS);
  t.strictSame(
    documented.map(({ limit }) => limit).sort(),
    Object.keys(DEFAULT_LIMITS)
      .filter((limit) => limit !== "streamReservedConnections") // documented as "a tenth of MAX_CONNECTIONS"
      .sort(),
    "every limit has its default documented",
  );
  for (const { name, limit, value } of documented) t.equal(DEFAULT_LIMITS[limit as keyof typeof DEFAULT_LIMITS], value, `${name}: documented ${value}`);
  const set = loadConfig({ REQUEST_TIMEOUT_MS: "5000", HEADERS_TIMEOUT_MS: "2000", MAX_CONNECTIONS: "0" }).limits;
  t.match(set, { requestTimeoutMs: 5000, headersTimeoutMs: 2000, maxConnections: 0 });
  t.equal(loadConfig({ REQUEST_TIMEOUT_MS: "3000" }).limits.headersTimeoutMs, 3000, "headers timeout never above the request timeout");
});

t.test("a bad limit stops the server with a line saying which", async (t) => {
  t.throws(() => loadConfig({ REQUEST_TIMEOUT_MS: "30s", MAX_CONNECTIONS: "-1", HEADERS_TIMEOUT_MS: "0" }), {
    name: "ConfigError",
    problems: [/REQUEST_TIMEOUT_MS=30s/, /MAX_CONNECTIONS=-1/, /HEADERS_TIMEOUT_MS must be above 0/],
  });
});

t.test("stream caps, the connections kept from streams, and the /mcp rate limit: defaults, overrides, bad values", async (t) => {
  t.match(loadConfig({}), {
    limits: { streamsPerUser: 64, streamsPerCredential: 16, streamReservedConnections: 100, streamLeaseSeconds: 30 },
    mcpRateLimit: { max: 300, windowSeconds: 60 },
  });
  t.equal(loadConfig({ MAX_CONNECTIONS: "50" }).limits.streamReservedConnections, 5, "the reserve defaults to a tenth of MAX_CONNECTIONS");
  const set = loadConfig({
    STREAMS_PER_USER: "0",
    STREAMS_PER_CREDENTIAL: "4",
    STREAM_RESERVED_CONNECTIONS: "20",
    STREAM_LEASE_SECONDS: "10",
    MCP_RATE_LIMIT: "0",
    MCP_RATE_LIMIT_WINDOW_SECONDS: "10",
  });
  t.match(set, {
    limits: { streamsPerUser: 0, streamsPerCredential: 4, streamReservedConnections: 20, streamLeaseSeconds: 10 },
    mcpRateLimit: { max: 0, windowSeconds: 10 },
  });
  t.throws(
    () =>
      loadConfig({
        STREAMS_PER_USER: "many",
        MAX_CONNECTIONS: "10",
        STREAM_RESERVED_CONNECTIONS: "10",
        STREAM_LEASE_SECONDS: "1",
        MCP_RATE_LIMIT: "-3",
        MCP_RATE_LIMIT_WINDOW_SECONDS: "0",
      }),
    {
      name: "ConfigError",
      problems: [
        /STREAMS_PER_USER=many/,
        /STREAM_RESERVED_CONNECTIONS=10 must be below MAX_CONNECTIONS=10/,
        /STREAM_LEASE_SECONDS=1 must be at least 3/,
        /MCP_RATE_LIMIT=-3/,
        /MCP_RATE_LIMIT_WINDOW_SECONDS=0/,
      ],
    },
  );
  t.throws(() => loadConfig({ MAX_CONNECTIONS: "100", STREAM_RESERVED_CONNECTIONS: "0" }), {
    name: "ConfigError",
    problems: [/STREAM_RESERVED_CONNECTIONS must be above 0/],
  });
  t.equal(loadConfig({ MAX_CONNECTIONS: "0", STREAM_RESERVED_CONNECTIONS: "0" }).limits.maxConnections, 0, "no connection cap: nothing to reserve");
});
