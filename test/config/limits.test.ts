import t from "tap";
import { DEFAULT_LIMITS, loadConfig } from "../../src/config/env.js";

t.test("server limits come from the environment, with documented defaults", async (t) => {
  t.strictSame(loadConfig({}).limits, DEFAULT_LIMITS, "unset: the defaults");
  t.match(DEFAULT_LIMITS, { requestTimeoutMs: 30_000, headersTimeoutMs: 10_000, keepAliveTimeoutMs: 72_000, connectionTimeoutMs: 120_000, maxRequestsPerSocket: 1_000, maxConnections: 1_000 });
  const set = loadConfig({ REQUEST_TIMEOUT_MS: "5000", HEADERS_TIMEOUT_MS: "2000", MAX_CONNECTIONS: "0" }).limits;
  t.match(set, { requestTimeoutMs: 5000, headersTimeoutMs: 2000, maxConnections: 0 });
  t.equal(loadConfig({ REQUEST_TIMEOUT_MS: "3000" }).limits.headersTimeoutMs, 3000, "headers timeout never above the request timeout");
});

t.test("a bad limit stops the server with a line saying which", async (t) => {
  t.throws(
    () => loadConfig({ REQUEST_TIMEOUT_MS: "30s", MAX_CONNECTIONS: "-1", HEADERS_TIMEOUT_MS: "0" }),
    { name: "ConfigError", problems: [/REQUEST_TIMEOUT_MS=30s/, /MAX_CONNECTIONS=-1/, /HEADERS_TIMEOUT_MS must be above 0/] },
  );
});
