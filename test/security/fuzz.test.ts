/**
 * Every route of the running app (its own inventory, so routes added later are included) gets bad
 * bodies, bad ids and bad headers from anonymous, cookie, API-token and device callers. Whatever
 * arrives, the answer is never a 5xx, never a stack trace, and never a hang.
 *
 * Numeric extremes (past a `bigint`, past 2^53, negative, exponent, hex) go, besides, into every query
 * parameter each route's schema declares and every path parameter, deterministically: a route that
 * adds a numeric parameter tomorrow is covered without anyone listing it.
 *
 * Bounded: FUZZ_RUNS requests per route and method (default 24); FUZZ_SEED replays a failure.
 */
import fc from "fast-check";
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { mintToken, newUser, PASSWORD } from "../helpers/auth.js";
import { TestClient } from "../helpers/client.js";
import { pair, protocolHeaders, ScriptedDevice, statTool, writeTool } from "../host/helpers.js";

const RUNS = Number(process.env.FUZZ_RUNS ?? 24);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
const REQUEST_DEADLINE_MS = 20_000;

const { app, url } = await startTestApp(t);
const owner = await newUser(url, "fuzz-owner", { adminOf: app });
const token = await mintToken(owner.client, { name: "fuzz" });
const device = await pair(owner.client, "fuzz-device");
await new ScriptedDevice(url, device.deviceId, device.token).hello([statTool, writeTool]);

/** The cookie caller's cookie header; a fuzzed sign-out or password change is repaired by signing in again. */
let cookie = owner.client.cookieHeader;
async function keepSignedIn(): Promise<void> {
  const me = await fetch(`${url}/api/me`, { headers: { cookie } });
  await me.arrayBuffer();
  if (me.status === 200) return;
  const client = new TestClient(url);
  const response = await client.signIn(owner.email, PASSWORD);
  if (response.status !== 200) throw new Error(`could not sign in again: ${response.status}`);
  cookie = client.cookieHeader;
}

// better-auth's endpoints, for the `/api/auth/*` splat (plus whatever the fuzzer makes up).
const AUTH_PATHS = [
  "sign-in/email",
  "sign-up/email",
  "sign-out",
  "get-session",
  "update-user",
  "change-password",
  "change-email",
  "request-password-reset",
  "reset-password",
  "reset-password/abc",
  "verify-email",
  "list-sessions",
  "revoke-session",
  "revoke-sessions",
  "revoke-other-sessions",
  "delete-user",
  "ok",
  "error",
];

const HUGE = "x".repeat(1024 * 1024 + 100);
/** Numbers as text that no bigint, double or page size holds, and the limits themselves. */
const NUMERIC_EXTREMES = [
  "9223372036854775808",
  "9223372036854775807",
  "-9223372036854775809",
  "18446744073709551616",
  "9".repeat(40),
  "9007199254740993",
  "2147483648",
  "4294967296",
  "-1",
  "0",
  "-0",
  "1e309",
  "-1e309",
  "1e-400",
  "NaN",
  "Infinity",
  "0x7fffffffffffffff",
  "1.5",
  "0".repeat(30) + "1",
];
const DEEP = "[".repeat(3_000) + "]".repeat(3_000);

const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom(
    "",
    "\u0000",
    "a\u0000b",
    "\ud800",
    "\udfff x",
    "../../etc/passwd",
    "%00",
    "' OR 1=1 --",
    "<script>alert(1)</script>",
    "😀".repeat(50),
    "a".repeat(5_000),
  ),
);
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    text,
    fc.integer(),
    fc.double(),
    fc.constantFrom(2 ** 63, -(2 ** 63), 2 ** 64, Number.MAX_SAFE_INTEGER + 2, Number.MAX_VALUE, -Number.MAX_VALUE, 5e-324, -0),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(text, tie("value"), { maxKeys: 4 }),
  ),
})).value;
/** Objects shaped like real bodies, with fields of the wrong type or with bad text. */
const FIELDS = [
  "name",
  "email",
  "password",
  "newPassword",
  "token",
  "code",
  "scopes",
  "expiresInDays",
  "deviceId",
  "tool",
  "input",
  "timeoutMs",
  "proposalId",
  "tools",
  "roots",
  "agent",
  "id",
  "ok",
  "result",
  "error",
  "platform",
];
const bodyObject = fc.dictionary(fc.constantFrom(...FIELDS), jsonValue, { maxKeys: 6 });

interface Body {
  contentType?: string;
  payload?: string;
}
const body: fc.Arbitrary<Body> = fc.oneof(
  fc.constant({}),
  bodyObject.map((value) => ({ contentType: "application/json", payload: JSON.stringify(value) })),
  jsonValue.map((value) => ({ contentType: "application/json", payload: JSON.stringify(value) ?? "null" })),
  fc.constantFrom<Body>(
    { contentType: "application/json", payload: "{not json" },
    { contentType: "application/json", payload: "" },
    { contentType: "application/json", payload: DEEP },
    { contentType: "application/json", payload: JSON.stringify({ name: HUGE }) },
    { contentType: "application/json", payload: '{"__proto__":{"isSiteAdmin":true}}' },
    { contentType: "application/json", payload: '{"timeoutMs":1e400,"expiresInDays":-1e400,"limit":9223372036854775808,"id":123456789012345678901234567890}' },
    { contentType: "application/json; charset=utf-16", payload: "{}" },
    { contentType: "text/plain", payload: "hello" },
    { contentType: "application/xml", payload: "<a/>" },
    { contentType: "multipart/form-data; boundary=x", payload: "--x\r\ngarbage" },
    { contentType: "application/x-www-form-urlencoded", payload: "name=a%00b&email=%ED%A0%80&password=%" },
    { contentType: "application/x-www-form-urlencoded", payload: "name=" + HUGE },
  ),
  fc
    .dictionary(fc.constantFrom(...FIELDS), text, { maxKeys: 4 })
    .map((fields) => ({ contentType: "application/x-www-form-urlencoded", payload: new URLSearchParams(fields).toString() })),
);

const id = fc.oneof(
  fc.constantFrom("x", "%00", "a%00b", "%ED%A0%80", "..", "%2e%2e", "a".repeat(120), "-1", "0", "%20", "null", "%FF", "%", "%25", "😀", "%F0%9F%98%80"),
  fc.constantFrom(...NUMERIC_EXTREMES),
  fc.uuid(),
  fc.string({ minLength: 1, maxLength: 20 }).map(encodeURIComponent),
);
const query = fc.oneof(
  fc.constant(""),
  fc.constantFrom("?token=%00", "?token=a&token=b", "?email=%ED%A0%80", "?reset=done", "?error=x", "?a[b]=c", "?%00=1", "?panel=%00", "?" + "a=1&".repeat(500)),
  fc
    .dictionary(fc.constantFrom("token", "email", "reset", "error", "path", "callbackURL", "code"), text, { maxKeys: 3 })
    .map((q) => "?" + new URLSearchParams(q).toString()),
  fc
    .dictionary(fc.constantFrom("before", "limit", "after", "offset", "page", "cursor"), fc.constantFrom(...NUMERIC_EXTREMES), { minKeys: 1, maxKeys: 2 })
    .map((q) => "?" + new URLSearchParams(q).toString()),
);

type Caller = "anonymous" | "cookie" | "token" | "device";
const caller = fc.constantFrom<Caller>("anonymous", "cookie", "token", "device");
const badHeaders = fc.oneof(
  fc.constant<Record<string, string>>({}),
  fc.constantFrom<Record<string, string>>(
    { cookie: "better-auth.session_token=garbage" },
    { cookie: "better-auth.session_token=abc.def%00" },
    { cookie: "better-auth.session_token=%ED%A0%80" },
    { cookie: "=; ;;=;better-auth.session_token" },
    { authorization: "Bearer " },
    { authorization: "Bearer sk_" + "A".repeat(43) },
    { authorization: "Bearer dt_" + "A".repeat(43) },
    { authorization: "Basic Zm9vOmJhcg==" },
    { authorization: "Bearer sk_\u00ff\u00fe" },
    { origin: "null" },
    { origin: "http://evil.example" },
    { referer: "not a url" },
    { "content-encoding": "gzip" },
    { "tether-protocol": "999" },
    { "tether-protocol": "abc" },
    { "hx-request": "true", "hx-target": "\u00ff" },
    { accept: "text/html" },
    { "x-forwarded-for": "not-an-ip, ::1" },
    { "user-agent": "\u00ff".repeat(2_000) },
  ),
);

function credentials(who: Caller): Record<string, string> {
  if (who === "cookie") return { cookie, origin: url };
  if (who === "token") return { authorization: `Bearer ${token}` };
  if (who === "device") return { authorization: `Bearer ${device.token}`, ...protocolHeaders };
  return {};
}

const STACK_TRACE = /\n\s+at \S+ \(|node_modules|\.ts:\d+:\d+|RangeError|TypeError|SyntaxError:/;

const routes = app.tetherRoutes.filter((route) => route.method !== "OPTIONS");
t.ok(routes.length >= 40, `${routes.length} route-methods to fuzz`);

for (const route of routes) {
  t.test(`${route.method} ${route.url}`, async (t) => {
    const names = [...route.url.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!);
    const splat = route.url.endsWith("*") ? fc.oneof(fc.constantFrom(...AUTH_PATHS), id) : fc.constant("");
    const request = fc.record({ ids: fc.tuple(...names.map(() => id)), splat, query, body, caller, headers: badHeaders });
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(request, async ({ ids, splat, query, body, caller: who, headers }) => {
        if (who === "cookie") await keepSignedIn();
        let path = route.url;
        names.forEach((name, i) => (path = path.replace(`:${name}`, ids[i]!)));
        path = path.replace("*", splat) + query;
        const init: RequestInit = {
          method: route.method,
          redirect: "manual",
          headers: { ...credentials(who), ...headers },
          signal: AbortSignal.timeout(REQUEST_DEADLINE_MS),
        };
        if (route.method !== "GET" && route.method !== "HEAD" && body.payload !== undefined) {
          init.headers = { ...init.headers, "content-type": body.contentType! };
          init.body = body.payload;
        }
        const response = await fetch(url + path, init);
        sent += 1;
        // A stream (device or page events) that opened is fine: read no further.
        const streaming = (response.headers.get("content-type") ?? "").startsWith("text/event-stream");
        const answer = streaming ? "" : await response.text();
        if (streaming) await response.body?.cancel();
        const what = `${route.method} ${path.slice(0, 120)} as ${who} ${JSON.stringify(headers).slice(0, 80)} body ${(body.payload ?? "").slice(0, 60)}`;
        if (response.status >= 500) throw new Error(`${response.status} for ${what}: ${answer.slice(0, 300)}`);
        if (STACK_TRACE.test(answer)) throw new Error(`a stack trace for ${what}: ${answer.slice(0, 300)}`);
      }),
      { numRuns: RUNS, ...(SEED !== undefined ? { seed: SEED } : {}) },
    );
    t.equal(sent, RUNS, `${sent} requests, none a 5xx or a stack trace`);
  });
}

// Deterministic: every declared query parameter and every path parameter gets every extreme, as the
// cookie caller (a site admin, so admin routes run their handlers too). The fuzz above samples them.
for (const route of routes.filter((route) => route.method !== "HEAD" && (route.queryParameters.length > 0 || route.url.includes(":")))) {
  t.test(`numeric extremes: ${route.method} ${route.url}`, async (t) => {
    const names = [...route.url.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!);
    const paths: string[] = [];
    for (const extreme of NUMERIC_EXTREMES) {
      const filled = (only?: string) =>
        names
          .reduce((path, name) => path.replace(`:${name}`, only === undefined || only === name ? encodeURIComponent(extreme) : "x"), route.url)
          .replace("*", "ok");
      for (const parameter of route.queryParameters) paths.push(`${filled("")}?${new URLSearchParams({ [parameter]: extreme })}`);
      for (const name of names) paths.push(filled(name));
    }
    for (const path of paths) {
      await keepSignedIn();
      const response = await fetch(url + path, {
        method: route.method,
        redirect: "manual",
        headers: credentials("cookie"),
        signal: AbortSignal.timeout(REQUEST_DEADLINE_MS),
      });
      const streaming = (response.headers.get("content-type") ?? "").startsWith("text/event-stream");
      const answer = streaming ? "" : await response.text();
      if (streaming) await response.body?.cancel();
      t.ok(response.status < 500 && !STACK_TRACE.test(answer), `${route.method} ${path.slice(0, 120)}: ${response.status}`, { answer: answer.slice(0, 200) });
    }
  });
}

t.test("afterwards the server is healthy", async (t) => {
  t.equal((await fetch(`${url}/healthz`)).status, 200);
});
