import t from "tap";
import { hashSecret } from "../../src/crypto/secrets.js";
import { userAdmin } from "../../src/plugins/auth/user-admin.js";
import { PAIRING_ALPHABET, parsePairingCode } from "../../src/plugins/host/pairing-code-format.js";
import { enroll, protocolHeaders, ScriptedDevice, signedIn, startHostServer } from "./helpers.js";
import { readJson } from "../helpers/client.js";

const enrollRaw = (url: string, body: unknown, headers: Record<string, string> = protocolHeaders) =>
  fetch(`${url}/api/host/enroll`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

/**
 * One server for the tests that only add rows of their own owners; the two that void or expire codes wholesale or
 * exhaust the address's enrollment limit start their own.
 */
const shared = await startHostServer(t);

t.test("pairing codes: format, enrollment, single use, stored hashed", async (t) => {
  const server = shared;
  const owner = await signedIn(server.url);

  const minted = await owner.post("/api/host/pairing-codes");
  t.equal(minted.status, 201);
  const { code, expiresAt } = await readJson(minted);
  t.match(code, new RegExp(`^[${PAIRING_ALPHABET}]{5}-[${PAIRING_ALPHABET}]{5}$`), "ABCDE-FGHJK from the unambiguous alphabet");
  const lifetime = new Date(expiresAt).getTime() - Date.now();
  t.ok(lifetime > 9 * 60_000 && lifetime <= 10 * 60_000, "lives about 10 minutes");

  const rows = await server.database.db.selectFrom("host_pairing_code").selectAll().where("user_id", "=", owner.userId).execute();
  t.equal(rows.length, 1);
  const bare = code.replace("-", "");
  t.notOk(JSON.stringify(rows).includes(bare), "the code itself is not stored");
  t.notOk(JSON.stringify(rows).includes(bare.slice(0, 4)), "nor its handle");

  // Case-insensitive, spaces and dashes optional.
  const typed = ` ${bare.slice(0, 3).toLowerCase()} ${bare.slice(3)} `;
  const enrolled = await enrollRaw(server.url, { code: typed, name: "laptop", platform: "linux-x64" });
  t.equal(enrolled.status, 201);
  const { deviceId, token } = await readJson(enrolled);
  t.match(deviceId, /^[0-9a-f-]{36}$/);
  t.match(token, /^dt_[A-Za-z0-9_-]{43}$/);
  const device = await server.database.db.selectFrom("host_device").selectAll().where("id", "=", deviceId).executeTakeFirstOrThrow();
  t.equal(device.token_hash, hashSecret(token), "the token is stored as a digest");
  t.equal(device.user_id, owner.userId);

  const again = await enrollRaw(server.url, { code, name: "other", platform: "linux" });
  t.equal(again.status, 409);
  t.same(await readJson(again), { code: "PAIRING_CODE_USED", message: "This pairing code was already used; mint a new one" });

  const list = await readJson(await owner.get("/api/host/devices"));
  t.equal(list.devices.length, 1);
  t.match(list.devices[0], { id: deviceId, name: "laptop", platform: "linux-x64", online: false, tools: [], roots: [] });
});

t.test("a wrong code, an expired code, and the void after 5 failed attempts", async (t) => {
  const server = await startHostServer(t);
  const owner = await signedIn(server.url);

  const wrong = await enrollRaw(server.url, { code: "22222-22222", name: "x", platform: "y" });
  t.equal(wrong.status, 400);
  t.equal((await readJson(wrong)).code, "PAIRING_CODE_INVALID");
  const malformed = await enrollRaw(server.url, { code: "not a code!", name: "x", platform: "y" });
  t.equal((await readJson(malformed)).code, "PAIRING_CODE_INVALID");

  // Expired: the right code after its time.
  const { code: stale } = await readJson(await owner.post("/api/host/pairing-codes"));
  await server.database.db
    .updateTable("host_pairing_code")
    .set({ expires_at: new Date(Date.now() - 1000) })
    .execute();
  const expired = await enrollRaw(server.url, { code: stale, name: "x", platform: "y" });
  t.equal(expired.status, 410);
  t.equal((await readJson(expired)).code, "PAIRING_CODE_EXPIRED");

  // Five wrong guesses at one code (same handle, wrong secret) void it, even for the right code.
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
  const bare: string = code.replace("-", "");
  const wrongSecret = (i: number) => {
    const tail = bare.slice(4).split("");
    tail[0] = PAIRING_ALPHABET[(PAIRING_ALPHABET.indexOf(tail[0]!) + 1 + i) % PAIRING_ALPHABET.length]!;
    return bare.slice(0, 4) + tail.join("");
  };
  for (let i = 0; i < 5; i++) {
    const guess = await enrollRaw(server.url, { code: wrongSecret(i), name: "x", platform: "y" });
    t.equal((await readJson(guess)).code, "PAIRING_CODE_INVALID", `guess ${i + 1} is refused`);
  }
  const afterVoid = await enrollRaw(server.url, { code, name: "x", platform: "y" });
  t.equal(afterVoid.status, 410);
  t.same(await readJson(afterVoid), { code: "PAIRING_CODE_VOID", message: "This pairing code was voided after too many wrong attempts; mint a new one" });
});

t.test("enrollment is rate-limited per client address", async (t) => {
  const server = await startHostServer(t);
  const statuses: number[] = [];
  for (let i = 0; i < 11; i++) {
    statuses.push((await enrollRaw(server.url, { code: "22222-22222", name: "x", platform: "y" })).status);
  }
  t.same(statuses.slice(0, 10), Array(10).fill(400), "10 attempts a minute are answered");
  const limited = await enrollRaw(server.url, { code: "22222-22222", name: "x", platform: "y" });
  t.equal(limited.status, 429);
  t.equal((await readJson(limited)).code, "RATE_LIMITED");
  t.match(limited.headers.get("retry-after"), /^\d+$/);
});

t.test("minting needs the owner's browser session; tokens and anonymous callers are refused", async (t) => {
  const server = shared;
  const anonymous = await fetch(`${server.url}/api/host/pairing-codes`, { method: "POST" });
  t.equal(anonymous.status, 401);
  const owner = await signedIn(server.url);
  const created = await readJson(await owner.post("/api/tokens", { name: "agent", scopes: ["host:call"] }));
  const byToken = await fetch(`${server.url}/api/host/pairing-codes`, { method: "POST", headers: { authorization: `Bearer ${created.token}` } });
  t.equal(byToken.status, 403);
  t.equal((await readJson(byToken)).code, "COOKIE_SESSION_REQUIRED");
  // A foreign origin is stopped by the one origin guard.
  const foreign = await owner.request("POST", "/api/host/pairing-codes", { json: {}, headers: { origin: "https://evil.example" } });
  t.equal(foreign.status, 403);
});

t.test("protocol version: a device speaking another version is told both", async (t) => {
  const server = shared;
  const owner = await signedIn(server.url);
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
  const v2 = await enrollRaw(server.url, { code, name: "x", platform: "y" }, { "tether-protocol": "2" });
  t.equal(v2.status, 400);
  t.same(await readJson(v2), {
    code: "PROTOCOL_VERSION_UNSUPPORTED",
    message: "This server speaks host protocol version 1; the device speaks version 2. Update tether-host or the server so they match.",
  });
  const { deviceId, token } = await enroll(server.url, code);
  const stream = await fetch(`${server.url}/api/host/stream`, { headers: { authorization: `Bearer ${token}`, "tether-protocol": "7" } });
  t.equal(stream.status, 400);
  t.match((await readJson(stream)).message, /version 1; the device speaks version 7/);
  const none = await fetch(`${server.url}/api/host/stream`, { headers: { authorization: `Bearer ${token}` } });
  t.match(await readJson(none), { code: "PROTOCOL_VERSION_UNSUPPORTED", message: /no version/ });

  const device = new ScriptedDevice(server.url, deviceId, token);
  const early = await fetch(`${server.url}/api/host/stream`, { headers: device.headers() });
  t.equal(early.status, 409);
  t.equal((await readJson(early)).code, "HELLO_REQUIRED");
});

t.test("revoking a device closes its stream at once and its token stops working", async (t) => {
  const server = shared;
  const owner = await signedIn(server.url);
  const other = await signedIn(server.url);
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
  const { deviceId, token } = await enroll(server.url, code);
  const second = await enroll(server.url, (await readJson(await owner.post("/api/host/pairing-codes"))).code, "second");
  const device = new ScriptedDevice(server.url, deviceId, token);
  t.equal((await device.hello()).status, 200);
  await device.connect();
  const sibling = new ScriptedDevice(server.url, second.deviceId, second.token);
  await sibling.hello();
  await sibling.connect();

  t.equal((await other.delete(`/api/host/devices/${deviceId}`)).status, 404, "another user cannot revoke it");
  t.equal((await owner.delete(`/api/host/devices/${deviceId}`)).status, 204);
  t.same(await device.next("close"), { reason: "revoked", message: "This device's credential was revoked; pair it again" });

  const again = await device.hello();
  t.equal(again.status, 401);
  t.equal((await readJson(again)).code, "DEVICE_REVOKED");
  const bogus = await fetch(`${server.url}/api/host/hello`, { method: "POST", headers: { ...protocolHeaders, authorization: "Bearer dt_nope" } });
  t.equal((await readJson(bogus)).code, "DEVICE_TOKEN_INVALID");
  t.equal((await owner.delete(`/api/host/devices/${deviceId}`)).status, 404, "revoking twice finds nothing");

  const list = await readJson(await owner.get("/api/host/devices"));
  t.same(
    list.devices.map((d: { id: string; online: boolean }) => [d.id, d.online]),
    [[second.deviceId, true]],
    "the sibling device keeps its own credential and stream",
  );
  sibling.disconnect();
});

t.test("deactivating the owner closes their device streams at once", async (t) => {
  const server = shared;
  const owner = await signedIn(server.url);
  const { deviceId, token } = await enroll(server.url, (await readJson(await owner.post("/api/host/pairing-codes"))).code);
  const device = new ScriptedDevice(server.url, deviceId, token);
  await device.hello();
  await device.connect();
  await userAdmin(server.app.tetherAuth, server.database.db).deactivate(owner.userId);
  t.match(await device.next("close"), { reason: "revoked", message: /deactivated/ });
  const again = await device.hello();
  t.equal((await readJson(again)).code, "DEVICE_REVOKED", "and its token no longer verifies");
});

t.test("deleting the user deletes their devices, codes and proposals", async (t) => {
  const server = shared;
  const owner = await signedIn(server.url);
  await readJson(await owner.post("/api/host/pairing-codes"));
  const { deviceId } = await enroll(server.url, (await readJson(await owner.post("/api/host/pairing-codes"))).code);
  await server.app.tetherAudit.flush();
  const { db } = server.database;
  const rowsOf = async () => [
    (await db.selectFrom("host_device").select("id").where("id", "=", deviceId).execute()).length,
    (await db.selectFrom("host_pairing_code").select("id").where("user_id", "=", owner.userId).execute()).length,
    (await db.selectFrom("activity_event").select("id").where("user_id", "=", owner.userId).execute()).length,
  ];
  t.ok(
    (await rowsOf()).every((count) => count > 0),
    "a device, codes and audit rows before",
  );
  await db.deleteFrom("user").where("id", "=", owner.userId).execute();
  t.same(await rowsOf(), [0, 0, 0], "none after");
});

t.test("parsePairingCode rejects what cannot be a code", async (t) => {
  t.equal(parsePairingCode("ABCDE-FGHJ"), null, "too short");
  t.equal(parsePairingCode("ABCDE-FGHJ0"), null, "0 is not in the alphabet");
  t.equal(parsePairingCode("ABCDE-FGHJI"), null, "I is not in the alphabet");
  t.ok(parsePairingCode("abcde fghjk"));
});
