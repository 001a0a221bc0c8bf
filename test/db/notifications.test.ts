import { randomBytes } from "node:crypto";
import pg from "pg";
import t from "tap";
import { listenWithPg, type ListenHandlers } from "../../src/db/notifications.js";
import { eventually } from "../helpers/eventually.js";
import { TEST_DATABASE_URL } from "../helpers/database.js";
import { freePort } from "../helpers/replica-process.js";

/**
 * Every cache of a process LISTENs through one dedicated PostgreSQL connection (src/db/notifications.ts):
 * each channel's notifications reach that channel's subscribers only, one heartbeat proves delivery for all,
 * a lost connection is lost (and then ready again) for all, and the connection ends with the last subscriber.
 */
const url = TEST_DATABASE_URL;
// The PGlite suite skips it (PGlite's notifications are in-process); CI's PostgreSQL suite runs it.
const skip = url ? false : "PostgreSQL only (set TEST_DATABASE_URL)";

class Recorder implements ListenHandlers {
  messages: string[] = [];
  ready = 0;
  lost = 0;
  proven = 0;
  onMessage(payload: string) {
    this.messages.push(payload);
  }
  onReady() {
    this.ready++;
  }
  onProven() {
    this.proven++;
  }
  onLost() {
    this.lost++;
  }
}

t.test("one LISTEN connection serves every channel of the process", { skip }, async (t) => {
  const applicationName = `tether-listen-test-${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: url! });
  await admin.connect();
  t.teardown(() => admin.end());
  const backends = async () =>
    (await admin.query<{ pid: number }>("select pid from pg_stat_activity where application_name = $1", [applicationName])).rows.map((row) => row.pid);
  const notify = (channel: string, payload: string) => admin.query("select pg_notify($1, $2)", [channel, payload]);

  const listen = listenWithPg({ connectionString: url!, application_name: applicationName }, { intervalMs: 100, boundMs: 2_000 });
  const sessions = new Recorder();
  const devices = new Recorder();
  const alsoSessions = new Recorder();
  const sessionChannel = `t_sessions_${randomBytes(4).toString("hex")}`;
  const deviceChannel = `t_devices_${randomBytes(4).toString("hex")}`;
  const subscriptions = await Promise.all([listen(sessionChannel, sessions), listen(deviceChannel, devices), listen(sessionChannel, alsoSessions)]);
  t.teardown(() => Promise.all(subscriptions.map((subscription) => subscription.close())));

  t.same([sessions.ready, devices.ready, alsoSessions.ready], [1, 1, 1], "every subscriber is told the channel is ready, once");
  t.equal((await backends()).length, 1, "one connection for both channels");

  await notify(sessionChannel, "s:1");
  await notify(deviceChannel, "d:1");
  await eventually(
    () => sessions.messages.length === 1 && devices.messages.length === 1 && alsoSessions.messages.length === 1,
    10_000,
    "each notification to arrive",
  );
  t.same(sessions.messages, ["s:1"], "a channel's subscriber hears its channel only");
  t.same(devices.messages, ["d:1"], "and so does the other channel's");
  t.same(alsoSessions.messages, ["s:1"], "two subscribers of one channel both hear it");
  await eventually(() => sessions.proven > 2 && devices.proven > 2, 10_000, "the one heartbeat to prove delivery on both channels");

  await t.test("a terminated connection is lost for everyone, then back for everyone", async (t) => {
    const [before] = await backends();
    await admin.query("select pg_terminate_backend($1)", [before]);
    await eventually(() => sessions.lost === 1 && devices.lost === 1, 10_000, "every subscriber to hear it is lost");
    await eventually(() => sessions.ready === 2 && devices.ready === 2 && alsoSessions.ready === 2, 10_000, "every subscriber to hear it is ready again");
    const after = await backends();
    t.equal(after.length, 1, "still one connection");
    t.not(after[0], before, "a new one");
    await notify(deviceChannel, "d:2");
    await notify(sessionChannel, "s:2");
    await eventually(() => devices.messages.includes("d:2") && sessions.messages.includes("s:2"), 10_000, "both channels to be heard on the new connection");
  });

  await t.test("a channel new to a live connection", async (t) => {
    const late = new Recorder();
    const lateChannel = `t_late_${randomBytes(4).toString("hex")}`;
    const subscription = await listen(lateChannel, late);
    t.equal(late.ready, 1, "is ready once subscribed");
    await notify(lateChannel, "late");
    await eventually(() => late.messages.includes("late"), 10_000, "the late subscriber to hear its message");
    t.equal((await backends()).length, 1, "on the same connection");
    await subscription.close();
    await notify(lateChannel, "after close");
    await notify(deviceChannel, "d:3");
    await eventually(() => devices.messages.includes("d:3"), 10_000, "the others to keep hearing theirs");
    t.notOk(late.messages.includes("after close"), "a closed subscription hears nothing more");
  });

  await t.test("the connection ends with the last subscription", async (t) => {
    await Promise.all(subscriptions.map((subscription) => subscription.close()));
    await eventually(async () => (await backends()).length === 0, 10_000, "no LISTEN connection to be left");
    const again = new Recorder();
    const subscription = await listen(sessionChannel, again);
    t.teardown(() => subscription.close());
    t.equal(again.ready, 1, "a later subscription opens it again");
    await notify(sessionChannel, "s:3");
    await eventually(() => again.messages.includes("s:3"), 10_000, "the new subscriber to hear its channel");
    t.notOk(sessions.messages.includes("s:3"), "a closed subscriber does not");
  });
});

t.test("a database that is down when the first subscription comes: the subscription fails", async (t) => {
  // A port nothing listens on: the first connect fails, as a database down at start-up does.
  const port = await freePort();
  const listen = listenWithPg({ connectionString: `postgres://postgres@127.0.0.1:${port}/test` }, { intervalMs: 100, boundMs: 1_000 });
  const handlers = new Recorder();
  await t.rejects(listen("t_down", handlers), "the subscription rejects");
  t.equal(handlers.ready, 0, "and was never ready");
});
