import { createHash } from "node:crypto";
import { sql } from "kysely";
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import { bare, bearer, mintToken, newUser, statusAfterSqlChange, whoAmI } from "../helpers/auth.js";
import { eventually } from "../helpers/eventually.js";

// Personal API tokens over /api/tokens: shown once, hashed at rest, listed without the secret,
// revocable, expiring, and never minted by another token.

const { url, database } = await startTestApp(t);
const db = database.db;
const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest("hex");

t.test("create: 201 and the created-token record, with the secret this once", async (t) => {
  const { client } = await newUser(url, "create");
  const response = await client.post("/api/tokens", { name: "  deploy bot  ", scopes: ["read", "admin", "read"], expiresInDays: 30 });
  t.equal(response.status, 201);
  const created = await readJson(response);
  t.match(created.token, /^sk_[A-Za-z0-9_-]{43}$/, "an sk_ value with 32 random bytes");
  t.equal(created.name, "deploy bot", "name trimmed");
  t.strictSame(created.scopes, ["admin", "read"], "scopes de-duplicated and sorted");
  t.equal(created.prefix, created.token.slice(0, 9), "the visible prefix");
  t.equal(created.lastUsedAt, null);
  t.ok(Math.abs(new Date(created.expiresAt).getTime() - (Date.now() + 30 * 86_400_000)) < 60_000, "expires in 30 days");
  t.strictSame(Object.keys(created).sort(), ["createdAt", "expiresAt", "id", "lastUsedAt", "name", "prefix", "scopes", "token"]);
  t.same(
    await whoAmI(url, bearer(created.token)),
    { status: 200, id: (await readJson(await client.get("/api/me"))).user.id, via: "token" },
    "it works at once",
  );
});

t.test("hashed at rest: no column holds the value; token_hash is its SHA-256", async (t) => {
  const { client, id } = await newUser(url, "hashed");
  const token = await mintToken(client, { name: "at rest" });
  const secretPart = token.slice(3);
  const rows = await sql<{ row: string }>`select row_to_json(t)::text as row from api_token t where user_id = ${id}`.execute(db);
  t.equal(rows.rows.length, 1);
  const row = rows.rows[0]!.row;
  t.notOk(row.includes(token), "the sk_ value is in no column");
  t.notOk(row.includes(secretPart), "nor its secret part");
  const stored = await db.selectFrom("api_token").selectAll().where("user_id", "=", id).executeTakeFirstOrThrow();
  t.equal(stored.token_hash, sha256(token), "token_hash = sha256 hex of the value");
  t.equal(stored.prefix, token.slice(0, 9), "only the short prefix is kept");
  await whoAmI(url, bearer(token));
  // last_used_at is written in the background, after the response.
  const lastUsed = async () => (await db.selectFrom("api_token").select("last_used_at").where("user_id", "=", id).executeTakeFirstOrThrow()).last_used_at;
  await eventually(async () => (await lastUsed()) !== null, 2_000, "last_used_at to be written");
  t.ok(await lastUsed(), "use is recorded");
  // Nothing else in the database holds it either (sessions, accounts, users, verification).
  for (const table of ["user", "session", "account", "verification"]) {
    const dump = await sql<{ n: string }>`select count(*) as n from ${sql.table(table)} x where row_to_json(x)::text like ${"%" + secretPart + "%"}`.execute(
      db,
    );
    t.equal(Number(dump.rows[0]!.n), 0, `not in ${table}`);
  }
});

t.test("list: the caller's tokens, never a secret", async (t) => {
  const { client } = await newUser(url, "list");
  const first = await mintToken(client, { name: "first" });
  const second = await mintToken(client, { name: "second", scopes: ["read"] });
  const other = await newUser(url, "list-other");
  await mintToken(other.client, { name: "not yours" });

  for (const [what, get] of [
    ["cookie", () => client.get("/api/tokens")],
    ["token", () => bare(url, "/api/tokens", bearer(first))],
  ] as const) {
    const response = await get();
    t.equal(response.status, 200, `${what}: 200`);
    const text = await response.text();
    for (const secret of [first, second]) {
      t.notOk(text.includes(secret), `${what}: no sk_ value in the JSON`);
      t.notOk(text.includes(secret.slice(9)), `${what}: not even the hidden part`);
    }
    const { tokens } = JSON.parse(text);
    t.strictSame(tokens.map((x: { name: string }) => x.name).sort(), ["first", "second"], `${what}: only the caller's tokens`);
    for (const token of tokens) {
      t.strictSame(Object.keys(token).sort(), ["createdAt", "expiresAt", "id", "lastUsedAt", "name", "prefix", "scopes"], `${what}: summary fields only`);
    }
  }
});

t.test("revoke: 204, and the token stops working at once", async (t) => {
  const { client } = await newUser(url, "revoke");
  const created = await readJson(await client.post("/api/tokens", { name: "to revoke" }));
  for (let i = 0; i < 3; i++) t.equal((await whoAmI(url, bearer(created.token))).status, 200, "works (and is cached)");
  const response = await client.delete(`/api/tokens/${created.id}`);
  t.equal(response.status, 204);
  t.equal(await response.text(), "", "no body");
  t.equal((await whoAmI(url, bearer(created.token))).status, 401, "the very next request is anonymous");
  t.equal((await client.delete(`/api/tokens/${created.id}`)).status, 404, "a second revoke: 404");
  t.strictSame((await readJson(await client.get("/api/tokens"))).tokens, [], "gone from the list");
});

t.test("another user's token id: 404, and that token keeps working", async (t) => {
  const owner = await newUser(url, "owner");
  const intruder = await newUser(url, "intruder");
  const created = await readJson(await owner.client.post("/api/tokens", { name: "mine" }));
  const response = await intruder.client.delete(`/api/tokens/${created.id}`);
  t.equal(response.status, 404);
  t.match(await readJson(response), { code: "NOT_FOUND", message: String });
  t.equal((await whoAmI(url, bearer(created.token))).status, 200, "still works");
  t.equal((await intruder.client.delete("/api/tokens/no-such-id")).status, 404, "an unknown id: 404");
});

t.test("expiry: an expired token is anonymous", async (t) => {
  const { client, id } = await newUser(url, "expiry");
  const token = await mintToken(client, { expiresInDays: 1 });
  t.equal((await whoAmI(url, bearer(token))).status, 200, "works before");
  await sql`update api_token set expires_at = now() - interval '1 second' where user_id = ${id}`.execute(db);
  t.equal(await statusAfterSqlChange(url, bearer(token), 401), 401, "anonymous after expires_at");
  t.equal((await bare(url, "/api/admin/users", bearer(token))).status, 302, "requireSession redirects it");
  t.equal((await client.get("/api/me")).status, 200, "the cookie session is unaffected");
});

t.test("a token cannot mint a token", async (t) => {
  const { client, id } = await newUser(url, "minting");
  const token = await mintToken(client);
  const response = await bare(
    url,
    "/api/tokens",
    { ...bearer(token), "content-type": "application/json" },
    {
      method: "POST",
      body: JSON.stringify({ name: "child" }),
    },
  );
  t.equal(response.status, 403);
  t.match(await readJson(response), { code: "COOKIE_SESSION_REQUIRED", message: /session/ });
  const rows = await db.selectFrom("api_token").select("id").where("user_id", "=", id).execute();
  t.equal(rows.length, 1, "no second token");
});

t.test("anonymous: 401 JSON", async (t) => {
  const anonymous = new TestClient(url);
  for (const [method, path] of [
    ["POST", "/api/tokens"],
    ["GET", "/api/tokens"],
    ["DELETE", "/api/tokens/some-id"],
  ] as const) {
    const response = await anonymous.request(method, path, method === "POST" ? { json: { name: "x" } } : {});
    t.equal(response.status, 401, `${method} ${path}`);
    t.match(response.headers.get("content-type"), /application\/json/);
    t.match(await readJson(response), { code: "UNAUTHENTICATED", message: String }, `${method} ${path}: body`);
  }
  t.equal((await whoAmI(url, bearer(`sk_${"B".repeat(43)}`))).status, 401, "a well-formed token nobody issued is anonymous");
});

t.test("a scoped token manages tokens only with the tokens scope", async (t) => {
  const { url } = await startTestApp(t);
  const client = new TestClient(url);
  await client.signUp(uniqueEmail("scoped"));
  const mint = async (scopes: string[]) => (await (await client.post("/api/tokens", { name: "s", scopes })).json()) as { id: string; token: string };
  const readOnly = await mint(["read"]);
  const manager = await mint(["tokens"]);
  const as = (token: string) => ({ authorization: `Bearer ${token}` });

  t.equal((await fetch(`${url}/api/tokens`, { headers: as(readOnly.token) })).status, 401, "a read-scoped token cannot list tokens");
  t.equal((await fetch(`${url}/api/tokens/${manager.id}`, { method: "DELETE", headers: as(readOnly.token) })).status, 401, "nor revoke one");
  t.equal((await fetch(`${url}/api/tokens`, { headers: as(manager.token) })).status, 200, "a tokens-scoped token can list");
  t.equal((await fetch(`${url}/api/tokens/${readOnly.id}`, { method: "DELETE", headers: as(manager.token) })).status, 204, "and revoke");
  t.equal((await fetch(`${url}/api/me`, { headers: as(readOnly.token) })).status, 401, "the revoked token is gone");
});
