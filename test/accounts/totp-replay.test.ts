/**
 * A TOTP code is accepted once (RFC 6238 §5.2): the code that turned two-factor on, or signed someone
 * in, is refused the next time, and so is every code of an earlier time step, on every path that
 * checks one (the sign-in's second step, the signed-in check). Of several sign-ins racing with the
 * same code, exactly one gets in.
 */
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { newUser, PASSWORD } from "../helpers/auth.js";
import { readJson, TestClient } from "../helpers/client.js";
import { secretOf, totp } from "../helpers/totp.js";

const { url } = await startTestApp(t);

/** A user with two-factor on, turned on with the current step's code (which is now used). */
async function withTwoFactor(label: string) {
  const user = await newUser(url, label);
  const enabled = await readJson(await user.client.post("/api/auth/two-factor/enable", { password: PASSWORD }));
  const secret = secretOf(enabled.totpURI);
  const confirmCode = totp(secret);
  const confirmed = await user.client.post("/api/auth/two-factor/verify-totp", { code: confirmCode });
  if (confirmed.status !== 200) throw new Error(`two-factor confirm: ${confirmed.status} ${await confirmed.text()}`);
  return { ...user, secret, confirmCode };
}

/** The password step of a new sign-in: a client holding better-auth's two-factor challenge. */
async function challenged(email: string): Promise<TestClient> {
  const client = new TestClient(url);
  const response = await client.signIn(email);
  const body = await readJson(response);
  if (response.status !== 200 || body.twoFactorRedirect !== true) throw new Error(`password step: ${response.status} ${JSON.stringify(body)}`);
  return client;
}

const verify = (client: TestClient, code: string) => client.post("/api/auth/two-factor/verify-totp", { code });

t.test("a code that signed in once is refused the second time, and so is an earlier step's", async (t) => {
  const user = await withTwoFactor("replay");
  const code = totp(user.secret, 1); // the next step: later than the one that turned two-factor on

  const first = await challenged(user.email);
  t.equal((await verify(first, code)).status, 200, "the first sign-in with the code gets in");
  t.equal((await first.get("/api/me")).status, 200);

  const second = await challenged(user.email);
  const replayed = await verify(second, code);
  t.equal(replayed.status, 401, "the same code does not sign in again");
  t.equal((await readJson(replayed)).code, "INVALID_CODE", "refused as an invalid code");
  t.equal((await verify(second, user.confirmCode)).status, 401, "an earlier step's code is refused too");
  t.equal((await second.get("/api/me")).status, 401, "no session for the second sign-in");
});

t.test("the code that turned two-factor on is spent: the signed-in check refuses it again", async (t) => {
  const user = await withTwoFactor("enable");
  const again = await verify(user.client, user.confirmCode);
  t.equal(again.status, 401);
  t.equal((await readJson(again)).code, "INVALID_CODE");
  t.equal((await verify(user.client, totp(user.secret, 1))).status, 200, "a later step's code is accepted");
});

t.test("sign-ins racing with the same code: exactly one gets in", async (t) => {
  const user = await withTwoFactor("race");
  const code = totp(user.secret, 1);
  const clients = await Promise.all(Array.from({ length: 6 }, () => challenged(user.email)));
  const statuses = await Promise.all(clients.map(async (client) => (await verify(client, code)).status));
  t.equal(statuses.filter((status) => status === 200).length, 1, `one 200 (${statuses.join(", ")})`);
  t.equal(statuses.filter((status) => status === 401).length, clients.length - 1, "the others are refused");
});
