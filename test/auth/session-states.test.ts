import { sql } from "kysely";
import t from "tap";
import type { App } from "../../src/app.js";
import { verifyApiToken } from "../../src/plugins/session/api-tokens.js";
import { startTestApp } from "../helpers/app.js";
import { rawStatusLine, readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import {
  afterSqlChange,
  bare,
  bearer,
  cookieOf,
  mintToken,
  newUser,
  PASSWORD,
  SESSION_COOKIE,
  sessionSetCookie,
  statusAfterSqlChange,
  whoAmI,
} from "../helpers/auth.js";

// Session states (active, expired, removed, deactivated), the error for each helper, the resolution
// order (cookie, then token, then anonymous) and scope rules, over real HTTP on one app.

/** Test-only routes that expose the session helpers directly. */
function testRoutes(app: App) {
  app.get<{ Querystring: { scope?: string } }>("/test/session", async (request) => {
    const session = await request.getSession(request.query.scope ? { requiredScope: request.query.scope } : undefined);
    return { userId: session?.user.id ?? null, via: session ? (session.session ? "cookie" : "token") : null };
  });
  app.get<{ Querystring: { scope?: string } }>("/test/require-session", async (request) => {
    const session = await request.requireSession(request.query.scope ? { requiredScope: request.query.scope } : undefined);
    return { userId: session.user.id };
  });
  app.get("/test/require-admin", async (request) => {
    const session = await request.requireSiteAdmin();
    return { userId: session.user.id, isSiteAdmin: session.user.isSiteAdmin };
  });
}

const { url, database, app } = await startTestApp(t, { beforeListen: testRoutes });
const db = database.db;

const sessionRows = async (userId: string) =>
  Number((await sql<{ n: string }>`select count(*) as n from "session" where "userId" = ${userId}`.execute(db)).rows[0]!.n);
const tokenRows = async (userId: string) =>
  Number((await sql<{ n: string }>`select count(*) as n from api_token where user_id = ${userId}`.execute(db)).rows[0]!.n);
/** The session token inside a signed cookie value (`<token>.<signature>`, URL-encoded). */
const tokenOfCookie = (cookie: string) => decodeURIComponent(cookie.slice(cookie.indexOf("=") + 1)).split(".")[0]!;

t.test("state table", async (t) => {
  t.test("sign-up with autoSignIn sets the session cookie in the same response", async (t) => {
    const email = uniqueEmail("signup");
    const response = await bare(
      url,
      "/api/auth/sign-up/email",
      { "content-type": "application/json", origin: url },
      {
        method: "POST",
        body: JSON.stringify({ name: "New Person", email, password: PASSWORD }),
      },
    );
    t.equal(response.status, 200);
    const json = await readJson(response);
    const cookie = sessionSetCookie(response);
    t.ok(cookie, "Set-Cookie carries the session cookie");
    t.ok(cookie!.attributes.has("httponly"), "HttpOnly");
    t.equal(cookie!.attributes.get("samesite")?.toLowerCase(), "lax", "SameSite=Lax");
    t.equal(cookie!.attributes.get("path"), "/", "Path=/");
    // The cookie alone, with nothing else from that response, identifies the new user.
    t.same(await whoAmI(url, { cookie: `${SESSION_COOKIE}=${cookie!.value}` }), { status: 200, id: json.user.id, via: "cookie" });
    t.equal(json.user.email, email);
    t.equal(json.user.isSiteAdmin, false, "a new user is not a site admin");
  });

  t.test("sign-in sets an HttpOnly, SameSite=Lax, Path=/ cookie that resolves", async (t) => {
    const { id, email } = await newUser(url, "signin");
    const client = new TestClient(url);
    const response = await client.signIn(email);
    t.equal(response.status, 200);
    const cookie = sessionSetCookie(response);
    t.ok(cookie, "Set-Cookie carries the session cookie");
    t.ok(cookie!.attributes.has("httponly"), "HttpOnly");
    t.equal(cookie!.attributes.get("samesite")?.toLowerCase(), "lax", "SameSite=Lax");
    t.equal(cookie!.attributes.get("path"), "/", "Path=/");
    t.same(await whoAmI(url, { cookie: cookieOf(client) }), { status: 200, id, via: "cookie" });
  });

  t.test("sign-in refused: an error object with a message, and no cookie", async (t) => {
    const { email } = await newUser(url, "refused");
    for (const [what, credentials] of [
      ["wrong password", { email, password: "not the password" }],
      ["unknown email", { email: uniqueEmail("nobody"), password: PASSWORD }],
    ] as const) {
      const response = await new TestClient(url).post("/api/auth/sign-in/email", credentials);
      t.equal(response.status, 401, `${what}: 401`);
      t.equal(sessionSetCookie(response), undefined, `${what}: no session cookie`);
      const json = await readJson(response);
      t.type(json.message, "string", `${what}: message`);
      t.ok(json.message.length > 0, `${what}: the message is not empty`);
    }
  });

  t.test("expiresAt passes: the cookie no longer resolves", async (t) => {
    const { client, id } = await newUser(url, "expiry");
    const cookie = cookieOf(client);
    t.equal((await whoAmI(url, { cookie })).status, 200, "resolves while active (and is cached)");
    await sql`update "session" set "expiresAt" = now() - interval '1 minute' where "userId" = ${id}`.execute(db);
    const expired = await afterSqlChange(
      () => bare(url, "/api/me", { cookie }),
      (r) => r.status === 401,
    );
    t.equal(expired.status, 401, "expired: anonymous");
    t.equal(sessionSetCookie(expired)?.attributes.get("max-age"), "0", "and the response clears the cookie");
    t.equal(await sessionRows(id), 0, "the expired row is removed");
    t.equal((await whoAmI(url, { cookie })).status, 401, "and stays anonymous");
    t.equal((await bare(url, "/test/require-session", { cookie })).status, 302, "requireSession redirects");
  });

  t.test("session row deleted: the cookie no longer resolves", async (t) => {
    const { client, id } = await newUser(url, "deleted-session");
    const cookie = cookieOf(client);
    t.equal((await whoAmI(url, { cookie })).status, 200);
    await sql`delete from "session" where token = ${tokenOfCookie(cookie)}`.execute(db);
    t.equal(await sessionRows(id), 0);
    t.equal(await statusAfterSqlChange(url, { cookie }, 401), 401);
  });

  t.test("sign-out clears the cookie and deletes the row; the old value never resolves again", async (t) => {
    const { client, id } = await newUser(url, "signout");
    const cookie = cookieOf(client);
    t.equal(await sessionRows(id), 1);
    t.equal((await whoAmI(url, { cookie })).status, 200);
    const response = await client.post("/api/auth/sign-out");
    t.equal(response.status, 200);
    const cleared = sessionSetCookie(response);
    t.ok(cleared, "Set-Cookie names the session cookie");
    t.equal(cleared!.value, "", "its value is emptied");
    t.equal(cleared!.attributes.get("max-age"), "0", "and it expires now");
    t.notOk(client.cookies.has(SESSION_COOKIE), "the browser drops it");
    t.equal(await sessionRows(id), 0, "the session row is gone");
    t.equal((await whoAmI(url, { cookie })).status, 401, "the old cookie value is anonymous");
    t.equal((await whoAmI(url, { cookie })).status, 401, "still anonymous later");
  });

  t.test("user row deleted: sessions and API tokens go with it", async (t) => {
    const { client, id } = await newUser(url, "cascade");
    const token = await mintToken(client);
    const cookie = cookieOf(client);
    t.equal((await whoAmI(url, bearer(token))).status, 200);
    t.equal((await whoAmI(url, { cookie })).status, 200);
    t.equal(await sessionRows(id), 1);
    t.equal(await tokenRows(id), 1);
    await sql`delete from "user" where id = ${id}`.execute(db);
    t.equal(await sessionRows(id), 0, "sessions deleted by cascade");
    t.equal(await tokenRows(id), 0, "API tokens deleted by cascade");
    t.equal(await statusAfterSqlChange(url, { cookie }, 401), 401, "the cookie is anonymous");
    t.equal(await statusAfterSqlChange(url, bearer(token), 401), 401, "the token is anonymous");
  });

  t.test("deactivatedAt set: cookie and tokens anonymous at once; sign-in refused", async (t) => {
    const { client, id, email } = await newUser(url, "deactivated");
    const token = await mintToken(client);
    const cookie = cookieOf(client);
    t.match(await verifyApiToken(db, token), { user: { id } }, "the exported verifier accepts the token while the user is active");
    t.equal((await whoAmI(url, { cookie })).status, 200, "cookie resolves (and is cached)");
    t.equal((await whoAmI(url, bearer(token))).status, 200, "token resolves (and is cached)");
    await sql`update "user" set "deactivatedAt" = now() where id = ${id}`.execute(db);
    t.equal(await statusAfterSqlChange(url, { cookie }, 401), 401, "the very next cookie request is anonymous");
    t.equal(await statusAfterSqlChange(url, bearer(token), 401), 401, "the very next token request is anonymous");
    t.same(await readJson(await bare(url, "/test/session", { cookie })), { userId: null, via: null }, "getSession is null");
    t.equal(await verifyApiToken(db, token), null, "the exported verifier refuses the token as the request path does");

    const again = await new TestClient(url).signIn(email);
    t.equal(again.status, 403, "sign-in of a deactivated user is refused");
    t.equal(sessionSetCookie(again), undefined, "with no cookie");
    t.match(await readJson(again), { message: /deactivated/i }, "and a message saying why");
    t.equal(await sessionRows(id), 0, "no session row: deactivation ended the old one, sign-in created none");
  });

  t.test("isSiteAdmin: requireSiteAdmin passes, for cookie and token", async (t) => {
    const admin = await newUser(url, "admin", { adminOf: app });
    const token = await mintToken(admin.client);
    const viaCookie = await admin.client.get("/test/require-admin");
    t.equal(viaCookie.status, 200);
    t.same(await readJson(viaCookie), { userId: admin.id, isSiteAdmin: true });
    const viaToken = await bare(url, "/test/require-admin", bearer(token));
    t.equal(viaToken.status, 200);
    t.same(await readJson(viaToken), { userId: admin.id, isSiteAdmin: true });
    const users = await admin.client.get("/api/admin/users");
    t.equal(users.status, 200, "the admin API answers");
    t.ok((await readJson(users)).users.some((u: { id: string }) => u.id === admin.id));
  });
});

t.test("error table", async (t) => {
  const admin = await newUser(url, "err-admin", { adminOf: app });
  const member = await newUser(url, "err-member");
  const readToken = await mintToken(admin.client, { scopes: ["read"] });
  const memberToken = await mintToken(member.client);

  t.test("requireSession with no session: 302 to /login", async (t) => {
    const anonymous = await bare(url, "/api/admin/users");
    t.equal(anonymous.status, 302, "anonymous");
    t.equal(anonymous.headers.get("location"), "/login");

    const scoped = await bare(url, "/api/admin/users", bearer(readToken));
    t.equal(scoped.status, 302, "an admin's token scoped `read` lacks `admin`");
    t.equal(scoped.headers.get("location"), "/login");

    const gone = await newUser(url, "err-deactivated");
    const goneCookie = cookieOf(gone.client);
    await sql`update "user" set "deactivatedAt" = now() where id = ${gone.id}`.execute(db);
    const deactivated = await afterSqlChange(
      () => bare(url, "/test/require-session", { cookie: goneCookie }),
      (r) => r.status === 302,
    );
    t.equal(deactivated.status, 302, "deactivated");
    t.equal(deactivated.headers.get("location"), "/login");
  });

  t.test("requireSiteAdmin with an authenticated non-admin: 403, body exactly Forbidden", async (t) => {
    for (const [what, headers] of [
      ["cookie", { cookie: cookieOf(member.client) }],
      ["token", bearer(memberToken)],
    ] as const) {
      for (const path of ["/api/admin/users", "/test/require-admin"]) {
        const response = await bare(url, path, headers);
        t.equal(response.status, 403, `${what} ${path}: 403`);
        t.equal(await response.text(), "Forbidden", `${what} ${path}: body`);
      }
    }
  });
});

t.test("resolution order", async (t) => {
  const alice = await newUser(url, "alice");
  const bob = await newUser(url, "bob");
  const bobToken = await mintToken(bob.client);

  t.test("a valid cookie wins over another user's token", async (t) => {
    t.same(await whoAmI(url, { cookie: cookieOf(alice.client), ...bearer(bobToken) }), { status: 200, id: alice.id, via: "cookie" });
  });

  t.test("token only when there is no cookie", async (t) => {
    t.same(await whoAmI(url, bearer(bobToken)), { status: 200, id: bob.id, via: "token" });
  });

  t.test("a cookie that is no session (tampered, or its row deleted) leaves the token to decide", async (t) => {
    const cookie = cookieOf(alice.client);
    // Flip the signature's first character: all six of its bits are HMAC bits. (The last one before "=" holds
    // two padding bits that base64 decoders ignore, so flipping A to B there left a valid signature.)
    const tampered = cookie.replace(/\.(.)([^.]*)$/, (_m, first: string, rest: string) => `.${first === "A" ? "B" : "A"}${rest}`);
    t.not(tampered, cookie);
    t.same(await whoAmI(url, { cookie: tampered, ...bearer(bobToken) }), { status: 200, id: bob.id, via: "token" }, "bad signature");
    const carol = await newUser(url, "carol");
    const carolCookie = cookieOf(carol.client);
    await sql`delete from "session" where "userId" = ${carol.id}`.execute(db);
    const afterDelete = await afterSqlChange(
      () => whoAmI(url, { cookie: carolCookie, ...bearer(bobToken) }),
      (r) => r.id === bob.id,
    );
    t.same(afterDelete, { status: 200, id: bob.id, via: "token" }, "deleted row");
  });

  t.test("an expired cookie is no cookie session either: the token decides", async (t) => {
    const dave = await newUser(url, "dave");
    const daveCookie = cookieOf(dave.client);
    await sql`update "session" set "expiresAt" = now() - interval '1 minute' where "userId" = ${dave.id}`.execute(db);
    const afterExpiry = await afterSqlChange(
      () => whoAmI(url, { cookie: daveCookie, ...bearer(bobToken) }),
      (r) => r.id === bob.id,
    );
    t.same(afterExpiry, { status: 200, id: bob.id, via: "token" });
    t.equal((await whoAmI(url, { cookie: daveCookie })).status, 401, "alone, the expired cookie is anonymous");
  });

  t.test("a deactivated user's cookie does not fall through to a token", async (t) => {
    const erin = await newUser(url, "erin");
    const erinCookie = cookieOf(erin.client);
    // Deactivation deletes the user's sessions (migration 0010); put the row back, as a session that
    // raced the deactivation would be, so the cookie names a live session of a deactivated user.
    const [row] = await sql<Record<string, unknown>>`select * from "session" where "userId" = ${erin.id}`.execute(db).then((r) => r.rows);
    await sql`update "user" set "deactivatedAt" = now() where id = ${erin.id}`.execute(db);
    await db
      .insertInto("session")
      .values(row as never)
      .execute();
    t.same(
      await afterSqlChange(
        () => whoAmI(url, { cookie: erinCookie, ...bearer(bobToken) }),
        (r) => r.status === 401,
      ),
      { status: 401 },
    );
  });

  t.test("malformed Authorization headers are anonymous, never a 500", async (t) => {
    const cases: Array<[string, string]> = [
      ["not Bearer", `Basic ${Buffer.from("a:b").toString("base64")}`],
      ["Token scheme with a real token", `Token ${bobToken}`],
      ["empty", ""],
      ["Bearer and nothing", "Bearer"],
      ["Bearer and spaces", "Bearer    "],
      ["a short sk_", "Bearer sk_short"],
      ["sk_ with one character too many", `Bearer ${bobToken}x`],
      ["sk_ with one character too few", `Bearer ${bobToken.slice(0, -1)}`],
      ["a well-formed sk_ nobody issued", `Bearer sk_${"A".repeat(43)}`],
      ["two tokens", `Bearer ${bobToken} ${bobToken}`],
      ["random junk", "junk;;,,==%%"],
      ["non-sk token", `Bearer ${"x".repeat(43)}`],
      ["a JWT-looking token", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"],
      ["the token without its prefix", `Bearer ${bobToken.slice(3)}`],
      ["a large header (8 KB)", `Bearer sk_${"a".repeat(8 * 1024)}`],
    ];
    for (const [what, value] of cases) {
      const response = await fetch(`${url}/api/me`, { headers: { authorization: value } });
      t.equal(response.status, 401, `${what}: anonymous`);
      t.match(await readJson(response), { code: "UNAUTHENTICATED" }, `${what}: JSON error`);
    }
    // Control characters, which fetch refuses to send: Node's HTTP parser refuses them before any route.
    t.equal(
      await rawStatusLine(url, "GET /api/me HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \u0001\u0002junk"),
      "HTTP/1.1 400 Bad Request",
      "control characters: 400",
    );
    const huge = await fetch(`${url}/api/me`, { headers: { authorization: `Bearer sk_${"a".repeat(64 * 1024)}` } });
    t.equal(huge.status, 431, "a header larger than the server accepts: 431, not 500");
    t.same(await whoAmI(url, bearer(bobToken)), { status: 200, id: bob.id, via: "token" }, "the server is fine afterwards");
    t.same(await whoAmI(url, { authorization: `bearer   ${bobToken}  ` }), { status: 200, id: bob.id, via: "token" }, "scheme is case-insensitive");
  });
});

t.test("scopes fail closed", async (t) => {
  const owner = await newUser(url, "scopes", { adminOf: app });
  const readToken = await mintToken(owner.client, { scopes: ["read"] });
  const adminToken = await mintToken(owner.client, { scopes: ["admin"] });
  const unscoped = await mintToken(owner.client);
  const session = async (headers: Record<string, string>, scope?: string) =>
    readJson(await bare(url, `/test/session${scope ? `?scope=${scope}` : ""}`, headers));

  t.same(await session(bearer(readToken), "write"), { userId: null, via: null }, "scoped token without the scope: anonymous");
  t.same(await session(bearer(readToken), "read"), { userId: owner.id, via: "token" }, "scoped token with the scope: allowed");
  t.same(await session(bearer(readToken)), { userId: owner.id, via: "token" }, "no required scope: allowed");
  t.same(await session(bearer(unscoped), "write"), { userId: owner.id, via: "token" }, "unscoped token: allowed");
  t.same(await session({ cookie: cookieOf(owner.client) }, "write"), { userId: owner.id, via: "cookie" }, "a cookie ignores requiredScope");

  const redirected = await bare(url, "/test/require-session?scope=write", bearer(readToken));
  t.equal(redirected.status, 302, "requireSession with a scope the token lacks: 302");
  t.equal(redirected.headers.get("location"), "/login");

  t.equal((await bare(url, "/api/admin/users", bearer(unscoped))).status, 200, "admin API with an admin's unscoped token");
  t.equal((await bare(url, "/api/admin/users", bearer(adminToken))).status, 200, "admin API with an `admin`-scoped token");
  t.equal((await bare(url, "/api/admin/users", bearer(readToken))).status, 302, "admin API with a `read`-scoped token: 302");
  t.equal((await bare(url, "/api/admin/users", { cookie: cookieOf(owner.client) })).status, 200, "admin API with the cookie");
});
