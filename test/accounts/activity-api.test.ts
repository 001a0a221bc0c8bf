/**
 * Accounts over HTTP: the activity log records each security event, a user reads only their own,
 * and per-account guessing protection answers the same whether or not the account exists.
 */
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { mintToken, newUser, PASSWORD, randomClientIp } from "../helpers/auth.js";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";
import { secretOf, totp } from "../helpers/totp.js";

const { app, url } = await startTestApp(t, { env: { SIGN_IN_LOCKOUT_ATTEMPTS: "3", SIGN_IN_LOCKOUT_SECONDS: "600" } });

async function eventsOf(
  client: TestClient,
): Promise<Array<{ event: string; outcome: string; ipAddress: string | null; userAgent: string | null; detail: any }>> {
  await app.tetherActivity.flush();
  const response = await client.get("/api/activity?limit=100");
  if (response.status !== 200) throw new Error(`activity: ${response.status} ${await response.text()}`);
  return (await readJson(response)).entries;
}

t.test("each account event is in the user's activity, with address and browser for sign-ins", async (t) => {
  const user = await newUser(url, "events");
  const agent = { "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/130.0 Safari/537.36" };
  const other = new TestClient(url, { headers: agent });
  t.equal((await other.signIn(user.email, "wrong password")).status, 401);
  t.equal((await other.signIn(user.email)).status, 200);

  t.equal((await user.client.post("/api/auth/change-password", { currentPassword: PASSWORD, newPassword: "a new passphrase" })).status, 200);
  const token = await mintToken(user.client, { name: "ci deploys" });
  const tokens = await readJson(await user.client.get("/api/tokens"));
  t.equal((await user.client.delete(`/api/tokens/${tokens.tokens[0].id}`)).status, 204);

  const enabled = await readJson(await user.client.post("/api/auth/two-factor/enable", { password: "a new passphrase" }));
  const secret = secretOf(enabled.totpURI);
  t.equal((await user.client.post("/api/auth/two-factor/verify-totp", { code: totp(secret) })).status, 200);
  t.equal((await user.client.post("/api/auth/two-factor/disable", { password: "a new passphrase" })).status, 200);

  const sessions = await readJson(await user.client.get("/api/auth/list-sessions"));
  t.ok(sessions.length >= 2, "two sessions");
  t.equal((await user.client.post("/api/auth/revoke-other-sessions")).status, 200);

  const events = await eventsOf(user.client);
  const names = events.map((e) => e.event);
  for (const name of [
    "sign-in",
    "sign-in.failed",
    "password.change",
    "token.create",
    "token.revoke",
    "two-factor.enable",
    "two-factor.disable",
    "session.revoke-others",
  ]) {
    t.ok(names.includes(name), `${name} recorded`);
  }
  const failed = events.find((e) => e.event === "sign-in.failed")!;
  t.equal(failed.outcome, "error");
  t.equal(failed.ipAddress, "127.0.0.1");
  t.match(failed.userAgent, /Chrome\/130/);
  t.notOk(JSON.stringify(events).includes(token), "no token value in the log");
  t.notOk(JSON.stringify(events).includes("a new passphrase"), "no password in the log");
});

t.test("per-account lockout: the same answers for an account and for an address with none", async (t) => {
  const user = await newUser(url, "locked");
  const nobody = uniqueEmail("nobody");
  const attempt = async (email: string, password: string) => {
    // A new client address each time: the per-IP limit is not what is being tested.
    const response = await new TestClient(url, { headers: { "x-forwarded-for": randomClientIp() } }).signIn(email, password);
    return { status: response.status, body: await readJson(response) };
  };
  for (let i = 0; i < 3; i++) {
    const [known, unknown] = [await attempt(user.email, "wrong"), await attempt(nobody, "wrong")];
    t.equal(known.status, 401);
    t.strictSame(known, unknown, "a wrong password and an unknown address read the same");
  }
  const knownLocked = await attempt(user.email, PASSWORD);
  const unknownLocked = await attempt(nobody, PASSWORD);
  t.equal(knownLocked.status, 429, "the right password is refused too while locked");
  t.strictSame(knownLocked, unknownLocked, "locked answers are identical");
  t.match(knownLocked.body.message, /Too many failed sign-ins/);

  const bystander = await newUser(url, "bystander");
  t.equal((await new TestClient(url).signIn(bystander.email)).status, 200, "other accounts are not affected");

  const names = (await eventsOf(user.client)).map((e) => e.event);
  t.equal(names.filter((n) => n === "sign-in.failed").length, 3);
  t.ok(names.includes("sign-in.locked"), "the lockout is in the account's activity");
});

t.test("a user reads only their own activity; the admin API is for site admins", async (t) => {
  const alice = await newUser(url, "alice");
  const bob = await newUser(url, "bob");
  const aliceEvents = await eventsOf(alice.client);
  t.ok(aliceEvents.length > 0);
  t.ok(
    aliceEvents.every((e: any) => e.user === null || e.user.id === alice.id),
    "only Alice's rows",
  );
  t.equal((await bob.client.get(`/api/activity?userId=${alice.id}`)).status, 400, "no way to name another user");
  t.equal((await bob.client.get(`/api/admin/activity?userId=${alice.id}`)).status, 403);
  t.equal((await new TestClient(url).get("/api/activity")).status, 401);

  const admin = await newUser(url, "admin", { adminOf: app });
  const page = await readJson(await admin.client.get(`/api/admin/activity?userId=${alice.id}&event=sign-up`));
  t.ok(page.entries.length >= 1);
  t.ok(
    page.entries.every((e: any) => e.user.id === alice.id && e.event === "sign-up"),
    "filters apply",
  );
});
