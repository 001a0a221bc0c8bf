import t, { type Test } from "tap";
import { startTestApp } from "../helpers/app.js";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import { openTestDatabase, rowCount } from "../helpers/database.js";
import { bare, bearer, mintToken, newUser, PASSWORD, sessionSetCookie } from "../helpers/auth.js";

// Bad input to every auth endpoint gets a clear 4xx, never a 500; and /healthz tells the truth.

const { url, database, app } = await startTestApp(t);
const db = database.db;
const admin = await newUser(url, "bad-admin", { adminOf: app });
const member = await newUser(url, "bad-member");

/** Asserts a clear client error: the status (or any 4xx), a JSON body with a non-empty message. */
async function clearError(t: Test, response: Response, what: string, status?: number, code?: string | RegExp) {
  if (status) t.equal(response.status, status, `${what}: ${status}`);
  else t.ok(response.status >= 400 && response.status < 500, `${what}: a 4xx (got ${response.status})`);
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    t.fail(`${what}: the body is JSON (got ${text.slice(0, 80)})`);
    return;
  }
  t.ok(typeof json?.message === "string" && json.message.length > 0, `${what}: a message (${json?.message})`);
  if (code) t.match(json.code, code, `${what}: code`);
}

const HUGE = JSON.stringify({ email: "a@example.com", password: "x".repeat(1024 * 1024 + 10) });
const raw = (client: TestClient, method: string, path: string, payload: string, contentType = "application/json") =>
  client.request(method, path, { body: payload, headers: { "content-type": contentType } });

t.test("POST /api/auth/sign-in/email", async (t) => {
  const anonymous = new TestClient(url);
  const cases: Array<[string, unknown]> = [
    ["email a number", { email: 123, password: PASSWORD }],
    ["password an object", { email: member.email, password: { $ne: "" } }],
    ["password missing", { email: member.email }],
    ["email missing", { password: PASSWORD }],
    ["empty object", {}],
    ["an array", [member.email, PASSWORD]],
    ["a string", "hello"],
    ["null", null],
    ["email not an email", { email: "not-an-email", password: PASSWORD }],
  ];
  for (const [what, json] of cases) {
    const response = await anonymous.request("POST", "/api/auth/sign-in/email", {
      body: JSON.stringify(json),
      headers: { "content-type": "application/json" },
    });
    t.equal(sessionSetCookie(response), undefined, `${what}: no cookie`);
    await clearError(t, response, what);
  }
  await clearError(t, await raw(anonymous, "POST", "/api/auth/sign-in/email", '{"email": '), "malformed JSON", 400, "INVALID_JSON");
  await clearError(t, await raw(anonymous, "POST", "/api/auth/sign-in/email", ""), "empty JSON body", 400);
  await clearError(t, await raw(anonymous, "POST", "/api/auth/sign-in/email", HUGE), "a body over 1 MB", 413, "BODY_TOO_LARGE");
  // Fastify reads text/plain as a string, which better-auth then refuses as no object.
  await clearError(t, await raw(anonymous, "POST", "/api/auth/sign-in/email", `email=${member.email}`, "text/plain"), "text/plain", 400);
  await clearError(t, await raw(anonymous, "POST", "/api/auth/sign-in/email", "<xml/>", "application/xml"), "XML", 415);
  const long = await anonymous.post("/api/auth/sign-in/email", { email: `${"a".repeat(10_000)}@example.com`, password: PASSWORD });
  await clearError(t, long, "a 10 KB email");
  await clearError(t, await anonymous.get("/api/auth/sign-in/email"), "GET on a POST endpoint", 404, "NOT_FOUND");
  await clearError(t, await anonymous.post("/api/auth/no-such-endpoint", {}), "an unknown auth endpoint", 404, "NOT_FOUND");
  // A form post (what a no-JS browser sends) is understood, and still checked.
  const form = await anonymous.request("POST", "/api/auth/sign-in/email", { form: { email: member.email, password: "wrong password" } });
  await clearError(t, form, "form-encoded, wrong password", 401);
});

t.test("POST /api/auth/sign-up/email", async (t) => {
  const anonymous = new TestClient(url);
  const count = async (email: string) => (await db.selectFrom("user").select("id").where("email", "=", email).execute()).length;

  for (const password of ["", "1234567", "short"]) {
    const email = uniqueEmail("short-pw");
    const response = await anonymous.post("/api/auth/sign-up/email", { name: "Short", email, password });
    await clearError(t, response, `password of ${password.length} characters`, 400, /PASSWORD_TOO_SHORT|VALIDATION_ERROR/);
    t.equal(sessionSetCookie(response), undefined, "no cookie");
    t.equal(await count(email), 0, "no user");
  }
  const eight = uniqueEmail("eight");
  t.equal((await anonymous.post("/api/auth/sign-up/email", { name: "Eight", email: eight, password: "12345678" })).status, 200, "8 characters is enough");

  const cases: Array<[string, unknown]> = [
    ["name missing", { email: uniqueEmail(), password: PASSWORD }],
    ["name a number", { name: 5, email: uniqueEmail(), password: PASSWORD }],
    ["email invalid", { name: "X", email: "nope", password: PASSWORD }],
    ["password a number", { name: "X", email: uniqueEmail(), password: 12345678 }],
    ["password over the maximum", { name: "X", email: uniqueEmail(), password: "p".repeat(10_000) }],
    ["existing email", { name: "X", email: member.email, password: PASSWORD }],
  ];
  for (const [what, json] of cases) await clearError(t, await anonymous.post("/api/auth/sign-up/email", json), what);
  await clearError(t, await raw(anonymous, "POST", "/api/auth/sign-up/email", "{name"), "malformed JSON", 400, "INVALID_JSON");
  await clearError(t, await raw(anonymous, "POST", "/api/auth/sign-up/email", HUGE), "a body over 1 MB", 413);

  // A client cannot make itself an admin, or pre-deactivate anyone, at sign-up (both fields are
  // `input: false`): better-auth puts the default in place of a field that has one (isSiteAdmin: the
  // account is made, as a member) and refuses one that has none (deactivatedAt: no account).
  const escalations: Array<[Record<string, unknown>, number, { isSiteAdmin: boolean; deactivatedAt: null } | undefined]> = [
    [{ isSiteAdmin: true }, 200, { isSiteAdmin: false, deactivatedAt: null }],
    [{ deactivatedAt: new Date().toISOString() }, 400, undefined],
  ];
  for (const [field, status, stored] of escalations) {
    const email = uniqueEmail("escalate");
    const response = await anonymous.post("/api/auth/sign-up/email", { name: "Sneaky", email, password: PASSWORD, ...field });
    t.equal(response.status, status, `${Object.keys(field)[0]}: ${status}`);
    await response.arrayBuffer();
    const row = await db.selectFrom("user").select(["isSiteAdmin", "deactivatedAt"]).where("email", "=", email).executeTakeFirst();
    t.strictSame(row, stored, `${Object.keys(field)[0]}: ${stored ? "ignored" : "no account"}`);
  }
});

t.test("/api/tokens", async (t) => {
  const { client, id } = member;
  const cases: Array<[string, unknown, RegExp?]> = [
    ["name missing", {}, /missing field "name"/],
    ["name empty", { name: "" }],
    ["name only spaces", { name: "   " }],
    ["name too long", { name: "n".repeat(101) }],
    ["name a number", { name: 5 }],
    ["scopes not a list", { name: "x", scopes: "read" }],
    ["a scope with spaces", { name: "x", scopes: ["Read All"] }],
    ["too many scopes", { name: "x", scopes: Array.from({ length: 33 }, (_, i) => `s${i}`) }],
    ["expiresInDays zero", { name: "x", expiresInDays: 0 }],
    ["expiresInDays a string", { name: "x", expiresInDays: "30" }],
    ["expiresInDays a fraction", { name: "x", expiresInDays: 1.5 }],
    ["expiresInDays too far", { name: "x", expiresInDays: 100_000 }],
    ["an unknown field", { name: "x", admin: true }, /unknown field "admin"/],
  ];
  for (const [what, json, message] of cases) {
    const response = await client.post("/api/tokens", json);
    const copy = response.clone();
    await clearError(t, response, what, 400, "INVALID_INPUT");
    if (message) t.match((await readJson(copy)).message, message, `${what}: says which field`);
  }
  await clearError(t, await raw(client, "POST", "/api/tokens", '{"name":'), "malformed JSON", 400, "INVALID_JSON");
  await clearError(t, await raw(client, "POST", "/api/tokens", JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) })), "a body over 1 MB", 413);
  await clearError(t, await raw(client, "POST", "/api/tokens", "name=x", "text/plain"), "text/plain", 400, "INVALID_INPUT");
  await clearError(t, await raw(client, "POST", "/api/tokens", "<x/>", "application/xml"), "XML", 415, "UNSUPPORTED_MEDIA_TYPE");
  t.strictSame((await readJson(await client.get("/api/tokens"))).tokens, [], "none of that created a token");

  // Over Fastify's 100-character parameter limit the router answers itself: 414, with a message.
  await clearError(t, await client.delete(`/api/tokens/${"i".repeat(101)}`), "an id too long", 414);
  await clearError(t, await client.delete(`/api/tokens/${encodeURIComponent("'; drop table api_token; --")}`), "an id that is SQL", 404);
  await clearError(t, await client.delete("/api/tokens/%E0%A4%A"), "a broken percent-encoding");
  await clearError(t, await bare(url, "/api/tokens", bearer("sk_malformed")), "a malformed token", 401, "UNAUTHENTICATED");
  t.equal(await rowCount(db, "api_token"), 0, "the table is intact and empty");
  t.ok(id);
});

t.test("/api/admin/*", async (t) => {
  const { client } = admin;
  const missing = "no-such-user";
  for (const path of [`/users/${missing}/deactivate`, `/users/${missing}/reactivate`]) {
    await clearError(t, await client.post(`/api/admin${path}`), `POST ${path}`, 404, "NOT_FOUND");
  }
  await clearError(t, await client.post(`/api/admin/users/${missing}/site-admin`, { value: true }), "site-admin of nobody", 404);
  await clearError(t, await client.delete(`/api/admin/users/${missing}`), "DELETE nobody", 404);
  await clearError(t, await client.post(`/api/admin/users/${"u".repeat(201)}/deactivate`), "an id too long", 414);

  const target = `/api/admin/users/${member.id}/site-admin`;
  for (const [what, json] of [
    ["value a string", { value: "yes" }],
    ["value missing", {}],
    ["value null", { value: null }],
    ["an extra field", { value: true, reason: "because" }],
  ] as const) {
    await clearError(t, await client.post(target, json), what, 400, "INVALID_INPUT");
  }
  await clearError(t, await raw(client, "POST", target, "{value:true}"), "malformed JSON", 400, "INVALID_JSON");
  await clearError(t, await raw(client, "POST", target, "value=true", "text/plain"), "text/plain", 400, "INVALID_INPUT");
  await clearError(t, await client.request("POST", target, { form: { value: "true" } }), "a form: value is a string", 400);
  const row = await db.selectFrom("user").select("isSiteAdmin").where("id", "=", member.id).executeTakeFirstOrThrow();
  t.equal(row.isSiteAdmin, false, "none of that promoted anyone");

  await clearError(t, await client.post(`/api/admin/users/${admin.id}/deactivate`), "deactivating yourself", 400, "CANNOT_DEACTIVATE_SELF");
  await clearError(t, await client.post(`/api/admin/users/${admin.id}/site-admin`, { value: false }), "demoting yourself", 400, "CANNOT_DEMOTE_SELF");
  await clearError(t, await client.delete(`/api/admin/users/${admin.id}`), "deleting yourself", 400, "CANNOT_DELETE_SELF");
  t.equal((await client.get("/api/me")).status, 200, "the admin is still signed in");
});

t.test("/api/admin/* checks who is asking before it reads the input", async (t) => {
  const anonymous = new TestClient(url);
  for (const [what, json] of [
    ["a valid body", { value: true }],
    ["an invalid body", { value: "yes" }],
  ] as const) {
    const response = await anonymous.post(`/api/admin/users/${member.id}/site-admin`, json);
    t.equal(response.status, 302, `anonymous, ${what}: 302`);
    t.equal(response.headers.get("location"), "/login");
    const forbidden = await member.client.post(`/api/admin/users/${member.id}/site-admin`, json);
    t.equal(forbidden.status, 403, `non-admin, ${what}: 403`);
    t.equal(await forbidden.text(), "Forbidden");
  }
});

t.test("/api/me", async (t) => {
  for (const [what, headers] of [
    ["a malformed token", bearer("sk_")],
    ["a token of a deleted user", bearer(`sk_${"Z".repeat(43)}`)],
    ["a garbage cookie", { cookie: "better-auth.session_token=%%%garbage" }],
    ["a cookie with no signature", { cookie: "better-auth.session_token=abc" }],
    ["a cookie that is all dots", { cookie: "better-auth.session_token=....." }],
    ["many cookies", { cookie: Array.from({ length: 200 }, (_, i) => `c${i}=${i}`).join("; ") }],
  ] as const) {
    await clearError(t, await bare(url, "/api/me", headers), what, 401, "UNAUTHENTICATED");
  }
  await clearError(t, await new TestClient(url).post("/api/me", {}), "POST /api/me", 404, "NOT_FOUND");
  const token = await mintToken(member.client);
  t.equal((await bare(url, "/api/me", bearer(token))).status, 200, "still works for a good token afterwards");
});

t.test("/healthz", async (t) => {
  const ok = await bare(url, "/healthz");
  t.equal(ok.status, 200);
  t.strictSame(await readJson(ok), { status: "ok" });

  // An app on a database of its own, which then goes away.
  const own = await openTestDatabase();
  const { url: lonelyUrl } = await startTestApp(t, { database: own });
  t.equal((await bare(lonelyUrl, "/healthz")).status, 200, "up while the database is");
  await own.close();
  const down = await bare(lonelyUrl, "/healthz");
  t.equal(down.status, 503, "503 once the database is closed");
  t.match(await readJson(down), { code: "DATABASE_UNAVAILABLE", message: String });
  t.equal((await bare(lonelyUrl, "/api/me")).status, 401, "an anonymous request still gets an answer");
});
