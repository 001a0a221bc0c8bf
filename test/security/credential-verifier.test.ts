/**
 * The one credential verifier (src/crypto/credential-verifier.ts) as both kinds use it, on a real database:
 * `sk_` API tokens and `dt_` device tokens are refused alike when malformed or unknown, verify while valid,
 * are refused once expired, revoked or their owner deactivated, and write their last-used time through the one
 * throttle: at most once per interval per credential, whatever the number of requests.
 */
import { randomUUID } from "node:crypto";
import t from "tap";
import { LastUsedThrottle } from "../../src/crypto/credential-verifier.js";
import { createDevice, createDeviceTokenVerifier, touchDevice } from "../../src/plugins/host/devices.js";
import { createApiToken, createApiTokenVerifier } from "../../src/plugins/session/api-tokens.js";
import { openTestDatabase } from "../helpers/database.js";
import { eventually } from "../helpers/eventually.js";

const database = await openTestDatabase();
t.teardown(() => database.close());
const { db } = database;

async function newUserId(): Promise<string> {
  const id = randomUUID();
  const now = new Date();
  await db
    .insertInto("user")
    .values({ id, name: "U", email: `${id}@example.com`, emailVerified: false, createdAt: now, updatedAt: now })
    .execute();
  return id;
}

t.test("API tokens: refused when malformed, unknown, expired or the owner deactivated; last used written once", async (t) => {
  const userId = await newUserId();
  const verify = createApiTokenVerifier(db);
  const { token, id } = await createApiToken(db, { userId, name: "t" });
  t.equal(await verify("sk_short"), null, "malformed");
  t.equal(await verify(`sk_${"A".repeat(43)}`), null, "unknown");
  t.match(await verify(token), { tokenId: id, user: { id: userId } }, "valid");
  const lastUsed = async () => (await db.selectFrom("api_token").select("last_used_at").where("id", "=", id).executeTakeFirstOrThrow()).last_used_at;
  await eventually(async () => (await lastUsed()) !== null, 5_000, "last_used_at written in the background");
  const first = await lastUsed();
  for (let i = 0; i < 5; i++) await verify(token);
  // A write that was made would land before a read issued after it on the same database.
  t.same(await lastUsed(), first, "five more uses within the minute write nothing");

  await db
    .updateTable("api_token")
    .set({ expires_at: new Date(Date.now() - 1) })
    .where("id", "=", id)
    .execute();
  t.equal(await verify(token), null, "expired");
  const other = await createApiToken(db, { userId, name: "u" });
  await db.updateTable("user").set({ deactivatedAt: new Date() }).where("id", "=", userId).execute();
  t.equal(await verify(other.token), null, "owner deactivated");
});

t.test("device tokens: the same refusals, revoked told apart", async (t) => {
  const userId = await newUserId();
  const verify = createDeviceTokenVerifier(db);
  const { deviceId, token } = await createDevice(db, { userId, name: "laptop", platform: "linux" });
  t.same(await verify("dt_short"), { ok: false, reason: "invalid" }, "malformed");
  t.same(await verify(`dt_${"A".repeat(43)}`), { ok: false, reason: "invalid" }, "unknown");
  t.same(await verify(token), { ok: true, device: { id: deviceId, userId, name: "laptop" } }, "valid: the device's identity, nothing more");
  await db.updateTable("host_device").set({ revoked_at: new Date() }).where("id", "=", deviceId).execute();
  t.same(await verify(token), { ok: false, reason: "revoked" }, "revoked");
  const second = await createDevice(db, { userId, name: "desk", platform: "linux" });
  await db.updateTable("user").set({ deactivatedAt: new Date() }).where("id", "=", userId).execute();
  t.same(await verify(second.token), { ok: false, reason: "revoked" }, "owner deactivated: revoked too");
});

t.test("a device's last seen goes through the same throttle: forced at connect, then at most every 30 s", async (t) => {
  const userId = await newUserId();
  const { deviceId } = await createDevice(db, { userId, name: "laptop", platform: "linux" });
  const seen = async () => (await db.selectFrom("host_device").select("last_seen_at").where("id", "=", deviceId).executeTakeFirstOrThrow()).last_seen_at;
  await touchDevice(db, deviceId, true);
  const connected = await seen();
  t.ok(connected, "written at connect");
  await touchDevice(db, deviceId);
  t.same(await seen(), connected, "a result right after writes nothing");
});

t.test("the throttle: due once per interval, seeded by the stored time, bounded", async (t) => {
  const throttle = new LastUsedThrottle(60_000, 3);
  t.ok(throttle.due("a", 0), "never written: due");
  t.notOk(throttle.due("a", 59_999), "within the interval: not due");
  t.ok(throttle.due("a", 60_000), "after it: due again");
  t.notOk(throttle.due("b", 100_000, new Date(90_000)), "a stored time within the interval counts as written");
  throttle.written("c", 100_000);
  t.notOk(throttle.due("c", 100_001), "a forced write counts too");
  for (const id of ["d", "e", "f"]) throttle.written(id, 100_000);
  t.ok(throttle.due("c", 100_002), "past the bound the least recently written is forgotten (one early write, no growth)");
});
