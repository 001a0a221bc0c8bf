/**
 * A passkey registration the server cannot accept is a 400 that says what to do, never a 500: the
 * browser's answer is made here by a software authenticator (a P-256 key, "none" attestation, the
 * exact bytes WebAuthn defines), once as a browser on this site makes it and then made on another
 * origin, for another relying party, and unreadable.
 */
import { createHash, generateKeyPairSync, randomBytes } from "node:crypto";
import { isoCBOR } from "@simplewebauthn/server/helpers";
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { newUser, type User } from "../helpers/auth.js";
import { readJson } from "../helpers/client.js";

const { url } = await startTestApp(t, { env: { PASSKEYS_ENABLED: "true" } });
const b64url = (bytes: Uint8Array | Buffer) => Buffer.from(bytes).toString("base64url");

interface Made {
  origin?: string;
  rpID?: string;
  /** Replace the attestation object (base64url) outright. */
  attestationObject?: string;
}

/** The JSON a browser's `credential.toJSON()` sends for `navigator.credentials.create()`. */
function attestation(challenge: string, made: Made = {}) {
  const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = publicKey.export({ format: "jwk" });
  const coseKey = new Map<number, number | Uint8Array>([
    [1, 2], // kty: EC2
    [3, -7], // alg: ES256
    [-1, 1], // crv: P-256
    [-2, Buffer.from(jwk.x!, "base64url")],
    [-3, Buffer.from(jwk.y!, "base64url")],
  ]);
  const credentialId = randomBytes(16);
  const rpIdHash = createHash("sha256")
    .update(made.rpID ?? new URL(url).hostname)
    .digest();
  const length = Buffer.alloc(2);
  length.writeUInt16BE(credentialId.length);
  const authData = Buffer.concat([
    rpIdHash,
    Buffer.from([0x45]), // user present, user verified, attested credential data
    Buffer.alloc(4), // sign count
    Buffer.alloc(16), // AAGUID
    length,
    credentialId,
    Buffer.from(isoCBOR.encode(coseKey)),
  ]);
  const attestationObject = isoCBOR.encode(
    new Map<string, unknown>([
      ["fmt", "none"],
      ["attStmt", new Map()],
      ["authData", new Uint8Array(authData)],
    ]) as never,
  );
  const clientData = { type: "webauthn.create", challenge, origin: made.origin ?? url, crossOrigin: false };
  return {
    id: b64url(credentialId),
    rawId: b64url(credentialId),
    type: "public-key",
    response: {
      clientDataJSON: b64url(Buffer.from(JSON.stringify(clientData))),
      attestationObject: made.attestationObject ?? b64url(attestationObject),
      transports: ["internal"],
    },
    clientExtensionResults: {},
    authenticatorAttachment: "platform",
  };
}

async function register(user: User, made: Made | ((challenge: string) => unknown)) {
  const options = await readJson(await user.client.get("/api/auth/passkey/generate-register-options"));
  const response = typeof made === "function" ? made(options.challenge) : attestation(options.challenge, made);
  return user.client.post("/api/auth/passkey/verify-registration", { response, name: "laptop" });
}

t.test("a passkey made on this site for this site is registered", async (t) => {
  const user = await newUser(url, "passkey-ok");
  const response = await register(user, {});
  t.equal(response.status, 200, await response.clone().text());
  const listed = await readJson(await user.client.get("/api/auth/passkey/list-user-passkeys"));
  t.equal(listed.length, 1, "the software authenticator's answer is a valid one");
});

t.test("every refused registration is a 400 with a message a person can act on", async (t) => {
  const user = await newUser(url, "passkey-refused");
  const cases: Array<[string, Made | ((challenge: string) => unknown), RegExp]> = [
    ["made on another origin", { origin: "https://evil.example" }, new RegExp(`made on another site, not on ${url}\\. Open ${url}`)],
    ["made for another relying party", { rpID: "evil.example" }, /for another site, not localhost\. Add a new passkey for localhost/],
    ["garbage attestation", { attestationObject: b64url(Buffer.from("not cbor at all")) }, /could not be read as a new passkey/],
    ["an answer to another challenge", () => attestation(b64url(randomBytes(32))), /answers an older request/],
    ["no answer at all", () => "garbage", /could not be read as a new passkey/],
  ];
  for (const [what, made, message] of cases) {
    const response = await register(user, made);
    t.equal(response.status, 400, what);
    t.match(await response.json(), { code: "PASSKEY_REGISTRATION_REFUSED", message }, what);
  }
  t.same(await readJson(await user.client.get("/api/auth/passkey/list-user-passkeys")), [], "nothing was registered");
  const good = await register(user, {});
  t.equal(good.status, 200, "the account can still add a passkey afterwards");
});

t.test("without a registration challenge the plugin's own 400 stands", async (t) => {
  const user = await newUser(url, "passkey-no-challenge");
  const response = await user.client.post("/api/auth/passkey/verify-registration", { response: attestation("x") });
  t.equal(response.status, 400);
  t.match(await response.json(), { message: "Challenge not found" });
});
