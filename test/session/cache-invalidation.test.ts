import { sql } from "kysely";
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";

/**
 * Changes made outside this process (plain SQL, another instance) reach the cache through a database
 * notification: at once on PGlite (in-process), within the notification's delivery (milliseconds) on
 * PostgreSQL. Waits at most 2 s for the answer to change, so a cache that is never invalidated fails.
 */
async function soon(check: () => Promise<number>, expected: number): Promise<number> {
  let status = await check();
  await eventually(async () => (status = await check()) === expected, 2_000).catch(() => {}); // the caller asserts the status
  return status;
}

// The session cache must never serve what the database no longer says, whoever changed it.
t.test("changes made with plain SQL reach the cache", async (t) => {
  const { url, database } = await startTestApp(t);
  const client = new TestClient(url);
  const email = uniqueEmail();
  const userId = await client.signUp(email);
  const token = ((await (await client.post("/api/tokens", { name: "t" })).json()) as { token: string }).token;
  const bearer = { authorization: `Bearer ${token}` };

  for (let i = 0; i < 3; i++) t.equal((await client.get("/api/me")).status, 200, "cookie resolves (and is cached)");
  t.equal((await fetch(`${url}/api/me`, { headers: bearer })).status, 200, "token resolves");

  const viaCookie = async () => (await client.get("/api/me")).status;
  const viaToken = async () => (await fetch(`${url}/api/me`, { headers: bearer })).status;

  await sql`update "user" set "name" = 'Renamed' where id = ${userId}`.execute(database.db);
  const nameSeen = async () => (((await (await client.get("/api/me")).json()) as { user: { name: string } }).user.name === "Renamed" ? 1 : 0);
  t.equal(await soon(nameSeen, 1), 1, "a renamed user is seen");

  await sql`update "user" set "deactivatedAt" = now() where id = ${userId}`.execute(database.db);
  t.equal(await soon(viaCookie, 401), 401, "deactivated: the cookie is anonymous");
  t.equal(await viaToken(), 401, "deactivated: the token is anonymous");

  await sql`update "user" set "deactivatedAt" = null where id = ${userId}`.execute(database.db);
  t.equal(await soon(viaToken, 200), 200, "reactivated: the token works again");
  t.equal(await viaCookie(), 401, "reactivated: the session stays ended (deactivation deleted it)");
  t.equal((await client.signIn(email)).status, 200, "signed in again");
  t.equal(await viaCookie(), 200);
  await sql`delete from "session" where "userId" = ${userId}`.execute(database.db);
  t.equal(await soon(viaCookie, 401), 401, "a deleted session row no longer resolves");

  t.equal(await viaToken(), 200);
  await sql`delete from api_token where user_id = ${userId}`.execute(database.db);
  t.equal(await soon(viaToken, 401), 401, "a deleted token no longer resolves");
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
