import { sql } from "kysely";
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";

// The session cache must never serve what the database no longer says, whoever changed it.
t.test("changes made with plain SQL reach the very next request", async (t) => {
  const { url, database } = await startTestApp(t);
  const client = new TestClient(url);
  const userId = await client.signUp(uniqueEmail());
  const token = ((await (await client.post("/api/tokens", { name: "t" })).json()) as { token: string }).token;
  const bearer = { authorization: `Bearer ${token}` };

  for (let i = 0; i < 3; i++) t.equal((await client.get("/api/me")).status, 200, "cookie resolves (and is cached)");
  t.equal((await fetch(`${url}/api/me`, { headers: bearer })).status, 200, "token resolves");

  await sql`update "user" set "name" = 'Renamed' where id = ${userId}`.execute(database.db);
  t.match(await (await client.get("/api/me")).json(), { user: { name: "Renamed" } }, "a renamed user is seen at once");

  await sql`update "user" set "deactivatedAt" = now() where id = ${userId}`.execute(database.db);
  t.equal((await client.get("/api/me")).status, 401, "deactivated: cookie is anonymous at once");
  t.equal((await fetch(`${url}/api/me`, { headers: bearer })).status, 401, "deactivated: token is anonymous at once");

  await sql`update "user" set "deactivatedAt" = null where id = ${userId}`.execute(database.db);
  t.equal((await client.get("/api/me")).status, 200, "reactivated");
  await sql`delete from "session" where "userId" = ${userId}`.execute(database.db);
  t.equal((await client.get("/api/me")).status, 401, "a deleted session row no longer resolves");

  t.equal((await fetch(`${url}/api/me`, { headers: bearer })).status, 200);
  await sql`delete from api_token where user_id = ${userId}`.execute(database.db);
  t.equal((await fetch(`${url}/api/me`, { headers: bearer })).status, 401, "a deleted token no longer resolves");
});

t.test("sign-out through the auth API ends the cached session before the response", async (t) => {
  const { url } = await startTestApp(t);
  const client = new TestClient(url);
  await client.signUp(uniqueEmail());
  const oldCookie = client.cookieHeader;
  t.equal((await client.get("/api/me")).status, 200);
  t.equal((await client.post("/api/auth/sign-out")).status, 200);
  const replay = await fetch(`${url}/api/me`, { headers: { cookie: oldCookie } });
  t.equal(replay.status, 401, "the old cookie value never resolves again");
});
