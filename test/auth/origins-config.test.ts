import t from "tap";
import { ConfigError, loadConfig } from "../../src/config/env.js";
import { startTestApp } from "../helpers/app.js";
import { bare, cookieOf, newUser, PASSWORD, sessionSetCookie } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";

// Only trusted origins may drive the auth API (and, through the same guard, any state change).

const { url, database } = await startTestApp(t, { env: { TRUSTED_ORIGINS: " https://a.example , ,https://b.example" } });
const user = await newUser(url, "origins");

const signIn = (headers: Record<string, string>) =>
  bare(
    url,
    "/api/auth/sign-in/email",
    { "content-type": "application/json", ...headers },
    {
      method: "POST",
      body: JSON.stringify({ email: user.email, password: PASSWORD }),
    },
  );

t.test("trusted origins may sign in", async (t) => {
  for (const origin of [url, "https://a.example", "https://b.example"]) {
    const response = await signIn({ origin });
    t.equal(response.status, 200, `Origin ${origin}`);
    t.ok(sessionSetCookie(response), `Origin ${origin}: cookie set`);
  }
});

t.test("an untrusted Origin is refused with 403 INVALID_ORIGIN", async (t) => {
  for (const origin of ["https://evil.example", "http://a.example", "https://a.example:8443", "https://a.example.evil.example", "null"]) {
    const response = await signIn({ origin });
    t.equal(response.status, 403, `Origin ${origin}`);
    t.match(await readJson(response), { code: "INVALID_ORIGIN", message: String }, `Origin ${origin}: code`);
    t.equal(sessionSetCookie(response), undefined, `Origin ${origin}: no cookie`);
  }
});

t.test("no Origin and no cookie (a script): allowed", async (t) => {
  const response = await signIn({});
  t.equal(response.status, 200);
  t.ok(sessionSetCookie(response));
});

t.test("a cookie without Origin or Referer: 403", async (t) => {
  const response = await signIn({ cookie: cookieOf(user.client) });
  t.equal(response.status, 403);
  t.match(await readJson(response), { code: "MISSING_ORIGIN" });
  const signOut = await bare(url, "/api/auth/sign-out", { cookie: cookieOf(user.client) }, { method: "POST" });
  t.equal(signOut.status, 403, "sign-out as well");
  t.equal((await bare(url, "/api/me", { cookie: cookieOf(user.client) })).status, 200, "so the session is untouched");
});

t.test("a Referer from a trusted origin stands in for a missing Origin", async (t) => {
  const cookie = cookieOf(user.client);
  const trusted = await signIn({ cookie, referer: "https://a.example/login?next=/home" });
  t.equal(trusted.status, 200, "trusted Referer");
  const own = await signIn({ cookie, referer: `${url}/login` });
  t.equal(own.status, 200, "the app's own pages");
  const untrusted = await signIn({ cookie, referer: "https://evil.example/a.example" });
  t.equal(untrusted.status, 403, "untrusted Referer");
  t.match(await readJson(untrusted), { code: "INVALID_ORIGIN" });
  const junk = await signIn({ cookie, referer: "not a url" });
  t.equal(junk.status, 403, "a Referer that is no URL");
});

t.test("the same guard protects the JSON APIs: no cross-site token minting", async (t) => {
  const cookie = cookieOf(user.client);
  const response = await bare(
    url,
    "/api/tokens",
    { cookie, origin: "https://evil.example", "content-type": "application/json" },
    {
      method: "POST",
      body: JSON.stringify({ name: "stolen" }),
    },
  );
  t.equal(response.status, 403);
  const count = await database.db.selectFrom("api_token").select("id").where("user_id", "=", user.id).execute();
  t.equal(count.length, 0, "no token was created");
  t.equal((await bare(url, "/api/me", { cookie, origin: "https://evil.example" })).status, 200, "GET is not state-changing: not checked");
});

t.test("any cookie counts as an ambient credential, not only the session cookie", async (t) => {
  const response = await signIn({ cookie: "unrelated=1" });
  t.equal(response.status, 403);
  t.match(await readJson(response), { code: "MISSING_ORIGIN" });
});

t.test("an https base URL: the __Secure- cookie, Secure, and it still resolves", async (t) => {
  // Behind a TLS-terminating proxy: the app speaks http on loopback but its public origin is https.
  const publicOrigin = "https://tether.example";
  const { url: appUrl } = await startTestApp(t, { database, env: { BETTER_AUTH_URL: publicOrigin } });
  const { email, id } = await newUser(url, "secure-cookie");
  const response = await bare(
    appUrl,
    "/api/auth/sign-in/email",
    { "content-type": "application/json", origin: publicOrigin },
    {
      method: "POST",
      body: JSON.stringify({ email, password: PASSWORD }),
    },
  );
  t.equal(response.status, 200);
  const line = response.headers.getSetCookie().find((c) => c.startsWith("__Secure-better-auth.session_token="));
  t.ok(line, "the cookie carries the __Secure- prefix");
  t.match(line, /;\s*Secure/i, "and the Secure attribute");
  const cookie = line!.split(";")[0]!;
  const me = await bare(appUrl, "/api/me", { cookie });
  t.equal(me.status, 200, "the resolver reads the prefixed cookie");
  t.match(await readJson(me), { user: { id }, via: "cookie" });
  t.equal((await bare(appUrl, "/api/me", { cookie: cookie.replace("__Secure-", "") })).status, 401, "the unprefixed name means nothing there");
});

t.test("configuration", async (t) => {
  t.test("TRUSTED_ORIGINS: entries trimmed, empty ones dropped", async (t) => {
    const config = loadConfig({ TRUSTED_ORIGINS: " https://a.example , ,https://b.example:8443/ ,," });
    t.strictSame(config.trustedOrigins, ["https://a.example", "https://b.example:8443"]);
    t.strictSame(loadConfig({}).trustedOrigins, [], "unset: none");
    t.strictSame(loadConfig({ TRUSTED_ORIGINS: " , " }).trustedOrigins, [], "only separators: none");
  });

  t.test("bad values: one ConfigError listing one line per bad value", async (t) => {
    const env = {
      NODE_ENV: "production",
      PORT: "99999",
      TRUSTED_ORIGINS: "https://ok.example, not a url ,https://x.example/path, ftp://files.example",
    };
    let error: unknown;
    try {
      loadConfig(env);
    } catch (caught) {
      error = caught;
    }
    t.ok(error instanceof ConfigError, "a ConfigError");
    const problems = (error as ConfigError).problems;
    t.equal(problems.length, 5, "five problems");
    t.match(problems, [/PORT=99999/, /"not a url"/, /"https:\/\/x\.example\/path"/, /"ftp:\/\/files\.example"/, /BETTER_AUTH_SECRET.*production/]);
    const lines = (error as Error).message.split("\n");
    t.equal(lines.length, 1 + problems.length, "the message: a heading and one line per problem");
    for (const problem of problems) t.ok(lines.includes(`  - ${problem}`), `listed: ${problem}`);
    t.notMatch((error as Error).message, /ok\.example/, "good entries are not reported");
  });

  t.test("each kind of bad value on its own", async (t) => {
    const problemsOf = (env: Record<string, string>) => {
      try {
        loadConfig(env);
        return [];
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        return error.problems;
      }
    };
    for (const port of ["abc", "-1", "65536", "1.5", "0x50", "1e3", "80abc"]) {
      t.match(problemsOf({ PORT: port }), [new RegExp(`^PORT=${port.replace(".", "\\.")} `)], `PORT=${port}`);
    }
    t.strictSame(problemsOf({ PORT: "8080" }), [], "PORT=8080 is fine");
    t.match(problemsOf({ NODE_ENV: "production" }), [/BETTER_AUTH_SECRET is required/], "production without a secret");
    t.match(problemsOf({ NODE_ENV: "production", BETTER_AUTH_SECRET: "short" }), [/at least 32/], "production with a short secret");
    t.strictSame(problemsOf({ NODE_ENV: "production", BETTER_AUTH_SECRET: "x".repeat(32) }), [], "production with a secret");
    t.match(problemsOf({ TRUSTED_ORIGINS: "https://user:pw@a.example" }), [/TRUSTED_ORIGINS entry/], "credentials in an origin");
    t.match(problemsOf({ BETTER_AUTH_URL: "localhost:3000" }), [/BETTER_AUTH_URL/], "a base URL without scheme");
  });

  t.test("production switches rate limiting on; anything else leaves it off", async (t) => {
    t.equal(loadConfig({ NODE_ENV: "production", BETTER_AUTH_SECRET: "x".repeat(32) }).production, true);
    for (const value of ["development", "test", "prod", "PRODUCTION", ""]) t.equal(loadConfig({ NODE_ENV: value }).production, false, `NODE_ENV=${value}`);
  });
});
