import t from "tap";
import { HEARTBEAT_BOUND_MS } from "../../../src/db/notifications.js";
import { TestClient, uniqueEmail } from "../../helpers/client.js";

/** The app LISTENs on one dedicated connection, for both invalidation channels (the session cache's and the device cache's). */
const LISTEN_CONNECTIONS = 1;
import { chaosUnavailable, sleep, stallBackends, startOwnPostgres, startServerProcess } from "../../helpers/services.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * What production does to a database connection, done to a PostgreSQL of the test's own while the app
 * runs as `npm start` runs it: connections terminated (idle pooled ones, then every one), an idle
 * session timeout, a restart, and a LISTEN connection that silently stalls. The process never dies;
 * during an outage users get a 503 that says so, and everything recovers by itself.
 */
t.test("the app survives what PostgreSQL does to its connections", { skip: chaosUnavailable() }, async (t) => {
  const postgres = await startOwnPostgres(t);
  const server = await startServerProcess(t, { DATABASE_URL: postgres.url });
  const { url } = server;
  const client = new TestClient(url);
  const userId = await client.signUp(uniqueEmail("chaos"));
  const me = async (who = client) => (await who.get("/api/me")).status;
  const listenPids = async () =>
    (await postgres.query<{ pid: number }>("select pid from pg_stat_activity where application_name = 'tether-listen'")).map((r) => r.pid);

  // Several requests at once, so the pool holds more than one connection.
  await Promise.all(Array.from({ length: 8 }, () => me()));
  t.equal((await listenPids()).length, LISTEN_CONNECTIONS, "one LISTEN connection for every invalidation channel");

  await t.test("idle pooled connections terminated", async (t) => {
    const killed = await postgres.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'tether'");
    t.ok(killed.length > 0, `${killed.length} pooled connection(s) terminated`);
    await sleep(500); // the pool hears of it asynchronously; without a listener the process dies here
    t.ok(server.alive(), "the process is alive");
    t.equal(await me(), 200, "requests are served");
  });

  await t.test("every connection terminated, the LISTEN one included", async (t) => {
    const [before] = await listenPids();
    await postgres.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name like 'tether%'");
    await sleep(500);
    t.ok(server.alive(), "the process is alive");
    t.equal(await me(), 200, "requests are served");
    await eventually(async () => (await listenPids()).some((pid) => pid !== before), 30_000, "the LISTEN connection to be back", 200);
  });

  await t.test("idle_session_timeout ends idle connections", async (t) => {
    await postgres.query("alter system set idle_session_timeout = '1500ms'");
    await postgres.query("select pg_reload_conf()");
    t.teardown(async () => {
      await postgres.query("alter system reset idle_session_timeout");
      await postgres.query("select pg_reload_conf()");
    });
    await Promise.all(Array.from({ length: 4 }, () => me()));
    await sleep(4_000);
    t.ok(server.alive(), "the process is alive");
    t.equal(await me(), 200, "requests are served");
  });

  await t.test("a restart: 503 while it is down, served again once it is back", async (t) => {
    await postgres.stop();
    await sleep(300);
    t.ok(server.alive(), "the process is alive while the database is down");

    const health = await fetch(`${url}/healthz`);
    t.equal(health.status, 503, "/healthz says 503");
    const api = await client.get("/api/me");
    t.equal(api.status, 503, "an API request gets 503");
    t.match(await api.json(), { code: "DATABASE_UNAVAILABLE", message: String }, "with { code, message }");
    const signIn = await new TestClient(url).signIn("nobody@example.com");
    t.equal(signIn.status, 503, "sign-in gets 503, not a 500");
    const page = await client.get("/devices", { accept: "text/html" });
    t.equal(page.status, 503, "a page gets 503");
    t.match(await page.text(), /Temporarily unavailable/, "a rendered message");

    await postgres.start();
    await eventually(async () => (await fetch(`${url}/healthz`)).status === 200, 30_000, "/healthz to say 200 once it is back", 200);
    t.equal(await me(), 200, "the signed-in user is served again");
    await eventually(async () => (await listenPids()).length === LISTEN_CONNECTIONS, 30_000, "the LISTEN connection to be back", 200);
    t.ok(server.alive(), "the process is alive");
  });

  await t.test("a silently stalled LISTEN connection: revocation still applies within the bound", async (t) => {
    // Every LISTEN backend at once, like a NAT that dropped the idle connections without a FIN: no error, no data.
    const stalled = await listenPids();
    t.equal(stalled.length, LISTEN_CONNECTIONS, "the LISTEN backend");
    for (let i = 0; i < 3; i++) t.equal(await me(), 200, "the session is served (and cached)");
    const resume = stallBackends(t, stalled);
    const revokedAt = Date.now();
    await postgres.query(`delete from "session" where "userId" = $1`, [userId]);
    await eventually(async () => (await me()) === 401, 60_000, "the deleted session to stop working", 100);
    const lag = Date.now() - revokedAt;
    // The bound, plus room for a loaded machine; without the heartbeat it lasts the cache's 5 minutes.
    t.ok(lag <= HEARTBEAT_BOUND_MS + 3_000, `revocation lagged ${lag} ms (bound ${HEARTBEAT_BOUND_MS} ms)`);
    await eventually(async () => (await listenPids()).some((pid) => !stalled.includes(pid)), 30_000, "the stalled connection to be replaced", 200);
    resume();

    // The new connection carries revocations again.
    const again = new TestClient(url);
    const otherId = await again.signUp(uniqueEmail("chaos-again"));
    t.equal(await me(again), 200);
    await postgres.query(`update "user" set "deactivatedAt" = now() where id = $1`, [otherId]);
    await eventually(async () => (await me(again)) === 401, 10_000, "a deactivation made in SQL to apply", 50);
    t.ok(server.alive(), "the process is alive");
  });

  t.notMatch(server.output(), /uncaught|unhandled/i, "no uncaught errors in the log");
});
