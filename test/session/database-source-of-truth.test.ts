import { sql } from "kysely";
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { newUser, PASSWORD, redisTest } from "../helpers/auth.js";
import type { TestClient } from "../helpers/client.js";

/**
 * With Redis configured, an admin's plain SQL (deactivating a user, deleting their sessions) must end
 * the cookie on every path: better-auth's own endpoints too, which once read sessions from Redis and
 * went on accepting them. Sessions now live in the database alone; Redis holds rate-limit counters.
 */
async function betterAuthAccepts(client: TestClient): Promise<{ getSession: boolean; updateUser: boolean; changePassword: boolean }> {
  const session = await client.get("/api/auth/get-session");
  const updated = await client.post("/api/auth/update-user", { name: "Still Here" });
  const changed = await client.post("/api/auth/change-password", { currentPassword: PASSWORD, newPassword: PASSWORD });
  return {
    getSession: session.status === 200 && (await session.json()) !== null,
    updateUser: updated.status === 200,
    changePassword: changed.status === 200,
  };
}

const NONE = { getSession: false, updateUser: false, changePassword: false };

redisTest(t, "Redis on: better-auth's endpoints follow the database", async (t) => {
  const { url, database, redis } = await startTestApp(t, { redis: true });
  t.equal(await redis!.ping(), "PONG", "Redis is there");

  await t.test("sessions deleted in SQL", async (t) => {
    const { client, id } = await newUser(url, "sql-signout");
    t.strictSame(await betterAuthAccepts(client), { getSession: true, updateUser: true, changePassword: true }, "the cookie works");
    await sql`delete from "session" where "userId" = ${id}`.execute(database.db);
    t.strictSame(await betterAuthAccepts(client), NONE, "get-session, update-user and change-password refuse it");
  });

  await t.test("a user deactivated in SQL", async (t) => {
    const { client, id } = await newUser(url, "sql-deactivated");
    t.strictSame(await betterAuthAccepts(client), { getSession: true, updateUser: true, changePassword: true }, "the cookie works");
    await sql`update "user" set "deactivatedAt" = now() where id = ${id}`.execute(database.db);
    t.strictSame(await betterAuthAccepts(client), NONE, "get-session, update-user and change-password refuse it");
    t.equal((await client.get("/api/me")).status, 401, "so does Tether's own resolution");
  });
});
