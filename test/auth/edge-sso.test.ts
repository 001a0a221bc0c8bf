import { sql } from "kysely";
import t, { type Test } from "tap";
import { startTestApp } from "../helpers/app.js";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import { openTestDatabase } from "../helpers/database.js";
import { bare, newUser, SESSION_COOKIE, sessionSetCookie, whoAmI } from "../helpers/auth.js";

// Edge SSO: a reverse proxy asserts identity in headers; only a trusted proxy may.

const database = await openTestDatabase();
t.teardown(() => database.close());
const db = database.db;
const EDGE_SECRET = "edge-secret-0123456789abcdef";

/** POST /api/auth/edge/sign-in as the proxy would (no Origin, no cookie), with identity headers. */
const edgeSignIn = (url: string, headers: Record<string, string>) => bare(url, "/api/auth/edge/sign-in", headers, { method: "POST" });

const userCount = async (email: string) => Number((await sql<{ n: string }>`select count(*) as n from "user" where email = ${email}`.execute(db)).rows[0]!.n);

/** Asserts a refused edge sign-in: 403 with `code`, and no session cookie. */
async function refused(t: Test, response: Response, code: string, what: string) {
  t.equal(response.status, 403, `${what}: 403`);
  t.match(await readJson(response), { code, message: String }, `${what}: ${code}`);
  t.equal(sessionSetCookie(response), undefined, `${what}: no cookie`);
}

t.test("from the trusted proxy", async (t) => {
  const { url, app } = await startTestApp(t, { database, env: { SSO_ENABLED: "true", EDGE_SSO_TRUSTED_PROXIES: "127.0.0.1/32" } });
  t.equal(app.tetherEdgeSsoEnabled(), true, "tetherEdgeSsoEnabled() is true");

  t.test("an existing user: 200 and a session cookie that resolves", async (t) => {
    const { id, email } = await newUser(url, "edge");
    const response = await edgeSignIn(url, { "x-remote-email": ` ${email.toUpperCase()} `, "x-remote-user": "EDGE\\someone" });
    t.equal(response.status, 200);
    t.match(await readJson(response), { user: { id, email } });
    const cookie = sessionSetCookie(response);
    t.ok(cookie, "a session cookie");
    t.ok(cookie!.attributes.has("httponly"), "HttpOnly");
    t.same(await whoAmI(url, { cookie: `${SESSION_COOKIE}=${cookie!.value}` }), { status: 200, id, via: "cookie" }, "it resolves");
  });

  t.test("an unknown user without provisioning: 403, nobody created", async (t) => {
    const email = uniqueEmail("edge-unknown");
    await refused(t, await edgeSignIn(url, { "x-remote-email": email }), "EDGE_UNKNOWN_USER", "unknown");
    t.equal(await userCount(email), 0);
  });

  t.test("a deactivated user: 403", async (t) => {
    const { id, email } = await newUser(url, "edge-deactivated");
    await sql`update "user" set "deactivatedAt" = now() where id = ${id}`.execute(db);
    await refused(t, await edgeSignIn(url, { "x-remote-email": email }), "ACCOUNT_DEACTIVATED", "deactivated");
  });

  t.test("no usable identity: 400, never 500", async (t) => {
    for (const [what, headers] of [
      ["no email header", {}],
      ["empty", { "x-remote-email": "" }],
      ["not an email", { "x-remote-email": "someone" }],
      ["two addresses", { "x-remote-email": "a@example.com b@example.com" }],
      ["too long", { "x-remote-email": `${"a".repeat(250)}@example.com` }],
    ] as const) {
      const response = await edgeSignIn(url, headers);
      t.equal(response.status, 400, `${what}: 400`);
      t.match(await readJson(response), { code: "EDGE_NO_IDENTITY" }, `${what}: code`);
    }
  });
});

t.test("provisioning on: an unknown user is created once", async (t) => {
  const { url } = await startTestApp(t, {
    database,
    env: { SSO_ENABLED: "true", EDGE_SSO_TRUSTED_PROXIES: "127.0.0.1/32", EDGE_SSO_PROVISION: "true" },
  });
  const email = uniqueEmail("edge-new");
  const response = await edgeSignIn(url, { "x-remote-email": email, "x-remote-user": "New Person" });
  t.equal(response.status, 200);
  const { user } = await readJson(response);
  const row = await db.selectFrom("user").selectAll().where("email", "=", email).executeTakeFirstOrThrow();
  t.equal(row.id, user.id, "the user row exists");
  t.equal(row.name, "New Person", "named after the asserted principal");
  t.equal(row.emailVerified, true, "the proxy vouched for the email");
  t.equal(row.isSiteAdmin, false, "not an admin");
  const cookie = sessionSetCookie(response)!;
  t.same(await whoAmI(url, { cookie: `${SESSION_COOKIE}=${cookie.value}` }), { status: 200, id: user.id, via: "cookie" });
  const again = await edgeSignIn(url, { "x-remote-email": email });
  t.equal(again.status, 200, "signs in again");
  t.equal((await readJson(again)).user.id, user.id, "as the same user");
  t.equal(await userCount(email), 1, "no duplicate");
});

t.test("from an untrusted peer: 403 and no cookie, whatever the headers say", async (t) => {
  // Loopback is not the proxy here; trusting X-Forwarded-For must not make it one, nor the secret alone.
  const { url } = await startTestApp(t, {
    database,
    env: { SSO_ENABLED: "true", EDGE_SSO_TRUSTED_PROXIES: "10.9.9.9/32", EDGE_SSO_SECRET: EDGE_SECRET, TRUST_PROXY: "true" },
  });
  const { email } = await newUser(url, "edge-untrusted");
  const identity = { "x-remote-email": email };
  await refused(t, await edgeSignIn(url, identity), "EDGE_UNTRUSTED", "plain");
  await refused(t, await edgeSignIn(url, { ...identity, "x-edge-secret": EDGE_SECRET }), "EDGE_UNTRUSTED", "with the right secret");
  await refused(
    t,
    await edgeSignIn(url, { ...identity, "x-edge-secret": EDGE_SECRET, "x-forwarded-for": "10.9.9.9" }),
    "EDGE_UNTRUSTED",
    "claiming the proxy in X-Forwarded-For",
  );
  await refused(
    t,
    await edgeSignIn(url, { ...identity, "x-edge-secret": EDGE_SECRET, "x-tether-peer-ip": "10.9.9.9" }),
    "EDGE_UNTRUSTED",
    "forging the internal peer header",
  );
});

t.test("a shared secret: wrong or missing X-Edge-Secret is refused", async (t) => {
  const { url } = await startTestApp(t, { database, env: { SSO_ENABLED: "true", EDGE_SSO_SECRET: EDGE_SECRET } });
  const { id, email } = await newUser(url, "edge-secret");
  const identity = { "x-remote-email": email };
  await refused(t, await edgeSignIn(url, identity), "EDGE_UNTRUSTED", "missing");
  await refused(t, await edgeSignIn(url, { ...identity, "x-edge-secret": "wrong" }), "EDGE_UNTRUSTED", "wrong");
  await refused(t, await edgeSignIn(url, { ...identity, "x-edge-secret": `${EDGE_SECRET}x` }), "EDGE_UNTRUSTED", "one character more");
  await refused(t, await edgeSignIn(url, { ...identity, "x-edge-secret": EDGE_SECRET.toUpperCase() }), "EDGE_UNTRUSTED", "different case");
  const accepted = await edgeSignIn(url, { ...identity, "x-edge-secret": EDGE_SECRET });
  t.equal(accepted.status, 200, "the right secret");
  t.match(await readJson(accepted), { user: { id } });
});

t.test("neither proxies nor a secret configured: refuses everyone", async (t) => {
  const { url } = await startTestApp(t, { database, env: { SSO_ENABLED: "true", EDGE_SSO_PROVISION: "true" } });
  const { email } = await newUser(url, "edge-open");
  await refused(t, await edgeSignIn(url, { "x-remote-email": email }), "EDGE_UNTRUSTED", "an existing user");
  const newcomer = uniqueEmail("edge-open-new");
  await refused(t, await edgeSignIn(url, { "x-remote-email": newcomer, "x-edge-secret": "anything" }), "EDGE_UNTRUSTED", "a new one");
  t.equal(await userCount(newcomer), 0, "nobody provisioned");
});

t.test("SSO_ENABLED unset: no edge endpoint; email and password unchanged", async (t) => {
  const { url, app } = await startTestApp(t, { database, env: { EDGE_SSO_TRUSTED_PROXIES: "127.0.0.1/32" } });
  t.equal(app.tetherEdgeSsoEnabled(), false, "tetherEdgeSsoEnabled() is false");
  const { email } = await newUser(url, "edge-off");
  const response = await edgeSignIn(url, { "x-remote-email": email });
  t.equal(response.status, 404);
  t.equal(sessionSetCookie(response), undefined, "no cookie");
  const signIn = await new TestClient(url).signIn(email);
  t.equal(signIn.status, 200, "email and password sign-in works");
});
