import t from "tap";
import { openDatabase } from "../../../src/db/connect.js";
import { migrateToLatest } from "../../../src/db/migrate.js";
import { allMigrations } from "../../../migrations/index.js";
import { startTestApp } from "../../helpers/app.js";
import { PASSWORD } from "../../helpers/auth.js";
import { TestClient, uniqueEmail } from "../../helpers/client.js";
import { chaosUnavailable, stallBackends, startOwnPostgres } from "../../helpers/services.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * A password reset, a password change or revoke-other-sessions in this process ends every one of the
 * user's sessions in this process's cache before the response leaves, not only the caller's. To show
 * it does not rest on database notifications, the LISTEN backend is stalled (SIGSTOP) first, and the
 * heartbeat bound is raised to a minute so the cache keeps serving meanwhile: whatever is evicted here
 * was evicted by the auth API call itself.
 */
t.test("revoking through the auth API evicts all of the user's cached sessions at once", { skip: chaosUnavailable() }, async (t) => {
  const postgres = await startOwnPostgres(t);
  const database = await openDatabase({ kind: "postgres", url: postgres.url, listenHeartbeat: { boundMs: 60_000 } });
  t.teardown(() => database.close());
  await migrateToLatest(database.db, allMigrations);
  const { url } = await startTestApp(t, { database });

  // Every LISTEN backend (one per invalidation channel: sessions, devices), so no notification can help.
  const stalled = (await postgres.query<{ pid: number }>("select pid from pg_stat_activity where application_name = 'tether-listen'")).map((row) => row.pid);
  t.ok(stalled.length > 0, "the LISTEN backends");

  /** A user signed in from two places, both sessions resolved (and so cached). */
  const twoSessions = async (label: string) => {
    const first = new TestClient(url);
    const email = uniqueEmail(label);
    await first.signUp(email);
    const second = new TestClient(url);
    t.equal((await second.signIn(email)).status, 200);
    for (const client of [first, second]) t.equal((await client.get("/api/me")).status, 200, "resolved and cached");
    return { first, second, email };
  };
  const users = {
    revokeOthers: await twoSessions("revoke-others"),
    changePassword: await twoSessions("change-password"),
    reset: await twoSessions("reset"),
  };

  const resume = stallBackends(t, stalled);
  const stallStart = Date.now();

  await t.test("revoke-other-sessions", async (t) => {
    const { first, second } = users.revokeOthers;
    t.equal((await first.post("/api/auth/revoke-other-sessions")).status, 200);
    t.equal((await second.get("/api/me")).status, 401, "the other session is over at once");
    t.equal((await first.get("/api/me")).status, 200, "the caller's goes on");
  });

  await t.test("change-password, revoking other sessions", async (t) => {
    const { first, second } = users.changePassword;
    const changed = await first.post("/api/auth/change-password", {
      currentPassword: PASSWORD,
      newPassword: "another horse battery",
      revokeOtherSessions: true,
    });
    t.equal(changed.status, 200);
    t.equal((await second.get("/api/me")).status, 401, "the other session is over at once");
  });

  await t.test("reset-password", async (t) => {
    const { first, second, email } = users.reset;
    const requested = await new TestClient(url).post("/api/auth/request-password-reset", { email, redirectTo: "/reset-password" });
    t.equal(requested.status, 200);
    const [row] = await postgres.query<{ identifier: string }>(
      `select identifier from verification where identifier like 'reset-password:%' order by "createdAt" desc limit 1`,
    );
    const token = row!.identifier.slice("reset-password:".length);
    const reset = await new TestClient(url).post("/api/auth/reset-password", { token, newPassword: "a third horse battery" });
    t.equal(reset.status, 200);
    for (const client of [first, second]) t.equal((await client.get("/api/me")).status, 401, "every session is over at once");
  });

  // Had any of this taken longer than the bound, the cache would have stopped serving anyway and the
  // answers above would prove nothing.
  t.ok(Date.now() - stallStart < 60_000, "all within the raised bound, while the cache still served");

  resume();
  const listening = async () => (await postgres.query("select pid from pg_stat_activity where application_name = 'tether-listen'")).length === stalled.length;
  await eventually(listening, 30_000, "LISTEN to be up", 200);
});
