import type { KyselyPlugin } from "kysely";
import { sql } from "kysely";
import t from "tap";
import { buildApp, type App } from "../../src/app.js";
import { loadConfig } from "../../src/config/env.js";
import type { DatabaseHandle } from "../../src/db/connect.js";
import { closeListening, freePort, startTestApp, TEST_SECRET } from "../helpers/app.js";
import { readJson, TestClient } from "../helpers/client.js";
import { afterSqlChange, bare, bearer, cookieOf, mintToken, newUser, PASSWORD, sessionSetCookie } from "../helpers/auth.js";
import { eventually } from "../helpers/eventually.js";

// request.getSession() must give a handler what better-auth itself would, and must cost nothing
// until asked, and one query when asked (any number of times).

const DAY_MS = 86_400_000;

function headersOf(request: { headers: Record<string, string | string[] | undefined> }): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return headers;
}

/** Test-only routes: ours (request.getSession) and theirs (better-auth's own getSession) side by side. */
function shapeRoutes(app: App) {
  app.get("/test/ours", async (request) => ({ value: await request.getSession() }));
  app.get("/test/theirs", async (request) => ({ value: await app.tetherAuth.api.getSession({ headers: headersOf(request) }) }));
  app.get("/test/fetch-session", async (request) => ({ value: await request.fetchSession() }));
}

const { url, database } = await startTestApp(t, { beforeListen: shapeRoutes });
const db = database.db;

const ours = async (headers: Record<string, string>) => (await readJson(await bare(url, "/test/ours", headers))).value;
const theirs = async (headers: Record<string, string>) => (await readJson(await bare(url, "/test/theirs", headers))).value;
/** Ours, once a direct SQL change has reached it (see afterSqlChange): null is what the callers wait for. */
const oursOnceNull = (headers: Record<string, string>) =>
  afterSqlChange(
    () => ours(headers),
    (v) => v === null,
  );
const rowExpiry = async (userId: string) =>
  (await db.selectFrom("session").select("expiresAt").where("userId", "=", userId).executeTakeFirstOrThrow()).expiresAt;

t.test("a fresh cookie session: ours equals better-auth's, field by field", async (t) => {
  const { client, id } = await newUser(url, "shape");
  const cookie = { cookie: cookieOf(client) };
  const mine = await ours(cookie);
  const library = await theirs(cookie);
  t.ok(mine, "ours resolves");
  t.ok(library, "better-auth resolves");
  t.equal(mine.user.id, id);
  t.strictSame(Object.keys(mine).sort(), ["session", "user"]);
  t.strictSame(Object.keys(mine.user).sort(), Object.keys(library.user).sort(), "the same user fields");
  t.strictSame(Object.keys(mine.session).sort(), Object.keys(library.session).sort(), "the same session fields");
  for (const key of Object.keys(library.user)) t.strictSame(mine.user[key], library.user[key], `user.${key}`);
  for (const key of Object.keys(library.session)) t.strictSame(mine.session[key], library.session[key], `session.${key}`);
  t.equal(mine.user.isSiteAdmin, false, "user carries isSiteAdmin");
  t.equal(mine.user.deactivatedAt, null, "and deactivatedAt");
  t.equal(mine.session.userId, id);
  t.strictSame(await ours(cookie), mine, "a cached resolution has the same shape");
});

t.test("an API-token caller: { user, session: null }, the same user", async (t) => {
  const { client } = await newUser(url, "token-shape");
  const fromCookie = await ours({ cookie: cookieOf(client) });
  const token = await mintToken(client);
  const fromToken = await ours(bearer(token));
  t.strictSame(fromToken, { user: fromCookie.user, session: null });
});

t.test("fetchSession: the UI-safe session, or null", async (t) => {
  const { client, id, email } = await newUser(url, "ui-shape");
  const ui = await readJson(await bare(url, "/test/fetch-session", { cookie: cookieOf(client) }));
  t.strictSame(ui, { value: { user: { id, name: "ui-shape", email, isSiteAdmin: false } } });
  t.strictSame(await readJson(await bare(url, "/test/fetch-session")), { value: null });
  // The UI is for browsers: an API token (here an unscoped one) is no UI session.
  const token = await mintToken(client);
  t.strictSame(await readJson(await bare(url, "/test/fetch-session", bearer(token))), { value: null }, "a token caller: null");
});

t.test("an expired session: both null", async (t) => {
  // Each order once: whichever looks first sees the expired row (the other then finds it removed).
  for (const first of ["theirs", "ours"] as const) {
    const { client, id } = await newUser(url, `expired-${first}`);
    const cookie = { cookie: cookieOf(client) };
    t.ok(await ours(cookie), "resolves before");
    await sql`update "session" set "expiresAt" = now() - interval '1 second' where "userId" = ${id}`.execute(db);
    const checks = {
      theirs: async () => t.equal(await theirs(cookie), null, "better-auth: null"),
      ours: async () => t.equal(await oursOnceNull(cookie), null, "ours: null"),
    };
    for (const check of first === "theirs" ? [checks.theirs, checks.ours] : [checks.ours, checks.theirs]) await check();
  }
});

t.test("a deactivated user: ours null", async (t) => {
  const { client, id } = await newUser(url, "deactivated-shape");
  const cookie = { cookie: cookieOf(client) };
  t.ok(await ours(cookie));
  await sql`update "user" set "deactivatedAt" = now() where id = ${id}`.execute(db);
  t.equal(await oursOnceNull(cookie), null);
});

t.test("a session due for refresh still resolves, is extended, and the response sets a new cookie", async (t) => {
  const { client, id } = await newUser(url, "refresh");
  const cookie = { cookie: cookieOf(client) };
  const before = await ours(cookie);
  // One hour left of seven days: older than updateAge (one day), so due for refresh.
  await sql`update "session" set "expiresAt" = now() + interval '1 hour' where "userId" = ${id}`.execute(db);
  const response = await afterSqlChange(
    () => bare(url, "/test/ours", cookie),
    (r) => sessionSetCookie(r) !== undefined,
  );
  t.equal(response.status, 200);
  const refreshed = (await readJson(response)).value;
  t.ok(refreshed, "ours resolves");
  t.equal(refreshed.user.id, id);
  t.equal(refreshed.session.id, before.session.id, "the same session");
  const newCookie = sessionSetCookie(response);
  t.ok(newCookie, "the response sets the session cookie again");
  t.equal(newCookie!.attributes.get("max-age"), String(7 * 24 * 60 * 60), "for the full lifetime");
  t.ok(newCookie!.attributes.has("httponly"));
  const expiresAt = new Date(refreshed.session.expiresAt).getTime();
  t.ok(Math.abs(expiresAt - (Date.now() + 7 * DAY_MS)) < 60_000, "ours reports the extended expiry");
  const stored = (await rowExpiry(id)).getTime();
  t.ok(Math.abs(stored - (Date.now() + 7 * DAY_MS)) < 60_000, "the row's expiresAt was extended");
  t.ok(Math.abs(stored - expiresAt) < 1000, "ours reports what the row says");

  // The renewed cookie keeps working, and both views agree again.
  const renewed = new TestClient(url);
  renewed.absorb(response);
  const again = { cookie: cookieOf(renewed) };
  const mine = await ours(again);
  t.strictSame(mine, await theirs(again), "ours equals better-auth's after the refresh");
  t.equal(sessionSetCookie(await bare(url, "/test/ours", again)), undefined, "no refresh on the next request");
});

t.test("a rememberMe: false session (a day, never extended): the same as better-auth's, and no refresh", async (t) => {
  const { email, id } = await newUser(url, "dont-remember");
  const client = new TestClient(url);
  const signIn = await client.post("/api/auth/sign-in/email", { email, password: PASSWORD, rememberMe: false });
  t.equal(signIn.status, 200);
  t.ok(client.cookies.has("better-auth.dont_remember"), "better-auth marks it");
  const headers = { cookie: client.cookieHeader };
  const response = await bare(url, "/test/ours", headers);
  t.equal(sessionSetCookie(response), undefined, "no refresh cookie");
  const mine = (await readJson(response)).value;
  t.equal(mine.user.id, id);
  t.ok(new Date(mine.session.expiresAt).getTime() - Date.now() < DAY_MS + 60_000, "it lasts a day");
  t.strictSame(mine, await theirs(headers), "ours equals better-auth's");
});

t.test("laziness: no query until asked, one query however often asked", async (t) => {
  let queries: string[] = [];
  const counting: KyselyPlugin = {
    transformQuery(args) {
      queries.push(args.node.kind);
      return args.node;
    },
    transformResult: async (args) => args.result,
  };
  const countedDb = db.withPlugin(counting);

  /** The example app on the same database through the counting Kysely; with or without the session cache. */
  async function countingApp(listen: DatabaseHandle["listen"] | undefined): Promise<string> {
    const port = await freePort();
    const appUrl = `http://localhost:${port}`;
    const config = loadConfig({ NODE_ENV: "test", BETTER_AUTH_URL: appUrl, PORT: String(port) });
    const app = await buildApp({ config, db: countedDb, secret: TEST_SECRET, ...(listen ? { listen } : {}) });
    app.get("/test/never", async () => ({ ok: true }));
    app.get("/test/twice", async (request) => {
      const first = await request.getSession();
      const second = await request.getSession({ requiredScope: "anything" });
      await request.requireSession();
      return { same: first === second, userId: first?.user.id ?? null };
    });
    await app.listen({ port, host: "127.0.0.1" });
    t.teardown(() => closeListening(app));
    return appUrl;
  }
  const count = async (appUrl: string, path: string, headers: Record<string, string>) => {
    queries = [];
    const response = await bare(appUrl, path, headers);
    const json = await readJson(response);
    return { status: response.status, json, queries: queries.length };
  };

  const { client, id, email } = await newUser(url, "lazy");
  const cookie = { cookie: cookieOf(client) };
  const token = await mintToken(client);

  const plain = await countingApp(undefined);
  t.strictSame(await count(plain, "/test/never", cookie), { status: 200, json: { ok: true }, queries: 0 }, "a route that never asks: no query");
  t.strictSame(await count(plain, "/test/never", bearer(token)), { status: 200, json: { ok: true }, queries: 0 }, "not even for a token");
  t.strictSame(await count(plain, "/test/twice", cookie), { status: 200, json: { same: true, userId: id }, queries: 1 }, "asked three times: one query");
  t.strictSame(
    await count(plain, "/test/twice", cookie),
    { status: 200, json: { same: true, userId: id }, queries: 1 },
    "without a cache, one query every request",
  );
  await count(plain, "/test/twice", bearer(token)); // the first use records last_used_at, in the background
  await eventually(
    async () => (await db.selectFrom("api_token").select("last_used_at").where("user_id", "=", id).executeTakeFirstOrThrow()).last_used_at !== null,
    2_000,
    "last_used_at to be written",
  );
  t.strictSame(await count(plain, "/test/twice", bearer(token)), { status: 200, json: { same: true, userId: id }, queries: 1 }, "a token: one query");
  t.strictSame(await count(plain, "/test/twice", {}), { status: 302, json: undefined, queries: 0 }, "anonymous: no query at all");
  const brief = new TestClient(url);
  await brief.post("/api/auth/sign-in/email", { email, password: PASSWORD, rememberMe: false });
  const briefHeaders = { cookie: brief.cookieHeader };
  t.strictSame(
    await count(plain, "/test/twice", briefHeaders),
    { status: 200, json: { same: true, userId: id }, queries: 1 },
    "a rememberMe: false session: one query too",
  );

  const cached = await countingApp(database.listen);
  t.equal((await count(cached, "/test/never", cookie)).queries, 0, "with the cache: a route that never asks, no query");
  t.equal((await count(cached, "/test/twice", cookie)).queries, 1, "with the cache: the first resolution queries once");
  t.strictSame(await count(cached, "/test/twice", cookie), { status: 200, json: { same: true, userId: id }, queries: 0 }, "then the cache answers");
});
