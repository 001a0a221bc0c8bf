/**
 * The production log never holds a secret: a real password-reset flow through a production-configured
 * app, with its log captured, leaves no reset token (nor cookie, bearer token or one-time code) in it.
 */
import { Writable } from "node:stream";
import { sql } from "kysely";
import t from "tap";
import { buildApp } from "../../src/app.js";
import { loadConfig } from "../../src/config/env.js";
import { redactUrl } from "../../src/http/log-redaction.js";
import { freePort } from "../helpers/app.js";
import { PASSWORD } from "../helpers/auth.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { openTestDatabase } from "../helpers/database.js";

t.test("redactUrl", async (t) => {
  t.equal(redactUrl("/api/auth/reset-password/abc123?callbackURL=%2Freset-password"), "/api/auth/reset-password/[redacted]?callbackURL=%2Freset-password");
  t.equal(redactUrl("/reset-password?token=abc123"), "/reset-password?token=[redacted]");
  t.equal(redactUrl("/api/auth/verify-email?token=t1&callbackURL=/home"), "/api/auth/verify-email?token=[redacted]&callbackURL=/home");
  t.equal(
    redactUrl("/cb?Code=c1&STATE=s1&user_code=u1&device_code=d1&page=2"),
    "/cb?Code=[redacted]&STATE=[redacted]&user_code=[redacted]&device_code=[redacted]&page=2",
  );
  t.equal(redactUrl("/x/sk_abcdef/y"), "/x/[redacted]/y");
  t.equal(redactUrl("/devices/123/tools/stat?path=/tmp"), "/devices/123/tools/stat?path=/tmp", "nothing secret, nothing changed");
});

t.test("a reset flow through a production app: the log has the requests, not the token", async (t) => {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
  const port = await freePort();
  const url = `http://localhost:${port}`;
  const config = loadConfig({ NODE_ENV: "production", BETTER_AUTH_SECRET: "production-secret-0123456789abcdef0123", BETTER_AUTH_URL: url, PORT: String(port) });
  const database = await openTestDatabase();
  // The server's own logger options (src/server.ts), writing to a stream the test reads.
  const app = await buildApp({ config, db: database.db, secret: "unused-in-production-0123456789abcdef", logger: { level: "info", stream } });
  await app.listen({ port, host: "127.0.0.1" });
  t.teardown(async () => {
    await app.close();
    await database.close();
  });

  const email = uniqueEmail("reset-log");
  const user = new TestClient(url);
  await user.signUp(email, PASSWORD, "Reset Rita");

  const browser = new TestClient(url, { headers: { accept: "text/html" } });
  t.equal((await browser.request("POST", "/forgot-password", { form: { email } })).status, 200);
  const row = await sql<{ identifier: string }>`select identifier from verification where identifier like 'reset-password:%'`.execute(database.db);
  const token = row.rows[0]!.identifier.slice("reset-password:".length);
  t.ok(token.length >= 16, "a reset token was issued");

  // The emailed link, then the page it redirects to, then the form.
  const link = await browser.get(`/api/auth/reset-password/${token}?callbackURL=${encodeURIComponent(`${url}/reset-password`)}`);
  t.equal(link.status, 302);
  const page = new URL(link.headers.get("location")!, url);
  t.equal(page.searchParams.get("token"), token);
  t.equal((await browser.get(page.pathname + page.search)).status, 200);
  const reset = await browser.request("POST", "/reset-password", { form: { token, newPassword: "a brand new password" } });
  t.equal(reset.status, 303, "the password was reset");

  // Other secrets a request may carry: a one-time code and state, a bearer token, a cookie.
  const sessionCookie = [...user.cookies.values()][0]!;
  await fetch(`${url}/api/auth/callback/x?code=one-time-code-42&state=state-secret-42`, {
    headers: { authorization: "Bearer sk_bearer-secret-42", cookie: `better-auth.session_token=${sessionCookie}` },
  });

  const log = lines.join("\n");
  const urls = lines.map((line) => JSON.parse(line) as { req?: { url: string } }).flatMap((entry) => (entry.req ? [entry.req.url] : []));
  t.ok(
    urls.includes("/api/auth/reset-password/[redacted]?callbackURL=" + encodeURIComponent(`${url}/reset-password`)),
    "the link's request is logged, redacted",
  );
  t.ok(urls.includes("/reset-password?token=[redacted]"), "the page's request is logged, redacted");
  t.ok(
    urls.some((u) => u.startsWith("/api/auth/callback/x?code=[redacted]&state=[redacted]")),
    "code and state are redacted",
  );
  for (const secret of [token, "one-time-code-42", "state-secret-42", "sk_bearer-secret-42", sessionCookie, "a brand new password"]) {
    t.notOk(log.includes(secret), `the log does not hold ${secret.slice(0, 12)}…`);
  }
});
