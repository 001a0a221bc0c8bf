/**
 * The signed release manifest (src/protocol/manifest.ts): what `tether-host update` trusts is decided here.
 * A manifest verifies only with a valid Ed25519 signature over its canonical bytes by a built-in key; any
 * change to what was signed, or a signature by another key, is refused with its own code.
 */
import { generateKeyPairSync } from "node:crypto";
import t from "tap";
import { canonicalJson, keyIdOf, publicKeyText, signManifest, verifyManifest, type ManifestBody } from "../../src/protocol/manifest.js";

const release = () => generateKeyPairSync("ed25519");
const body = (): ManifestBody => ({
  format: 1,
  version: "1.4.0",
  node: "24.21.0",
  files: {
    "linux-x64": { file: "tether-host-linux-x64", size: 128_191_680, sha256: "a".repeat(64) },
    "win-x64": { file: "tether-host-win-x64.exe", size: 90_000_000, sha256: "b".repeat(64) },
  },
});

t.test("canonical JSON: sorted keys at every level, no whitespace, whole numbers only", async (t) => {
  t.equal(canonicalJson({ b: 1, a: { d: [2, { z: true, y: null }], c: "é" } }), '{"a":{"c":"é","d":[2,{"y":null,"z":true}]},"b":1}');
  t.equal(canonicalJson(JSON.parse('{ "b" : 1,\n "a": 2 }')), canonicalJson({ a: 2, b: 1 }), "whitespace and key order do not change the bytes");
  t.throws(() => canonicalJson({ size: 1.5 }), /whole numbers/);
  t.throws(() => canonicalJson({ size: Number.MAX_SAFE_INTEGER + 2 }), /whole numbers/);
  t.throws(() => canonicalJson({ f: () => 1 }), /cannot hold/);
});

t.test("a manifest signed by a built-in key verifies, however it was stored", async (t) => {
  const key = release();
  const trusted = [publicKeyText(key.publicKey)];
  const manifest = signManifest(body(), [key.privateKey]);
  t.equal(manifest.signatures[0]!.keyId, keyIdOf(trusted[0]!));
  t.match(verifyManifest(manifest, trusted), { ok: true, manifest: { version: "1.4.0" }, keyId: keyIdOf(trusted[0]!) });
  // Pretty-printed with the keys in another order: the same canonical bytes.
  const reordered = JSON.parse(
    JSON.stringify({ signatures: manifest.signatures, signed: { files: manifest.signed.files, node: "24.21.0", version: "1.4.0", format: 1 } }, null, 4),
  );
  t.match(verifyManifest(reordered, trusted), { ok: true });
});

t.test("any change to what was signed is refused: MANIFEST_SIGNATURE_INVALID", async (t) => {
  const key = release();
  const trusted = [publicKeyText(key.publicKey)];
  const manifest = signManifest(body(), [key.privateKey]);
  const altered = (change: (signed: any) => void) => {
    const copy = JSON.parse(JSON.stringify(manifest));
    change(copy.signed);
    return verifyManifest(copy, trusted);
  };
  t.match(
    altered((signed) => (signed.version = "9.9.9")),
    { ok: false, code: "MANIFEST_SIGNATURE_INVALID" },
    "a higher version",
  );
  t.match(
    altered((signed) => (signed.files["linux-x64"].sha256 = "c".repeat(64))),
    { ok: false, code: "MANIFEST_SIGNATURE_INVALID" },
    "another digest",
  );
  t.match(
    altered((signed) => (signed.files["linux-x64"].size += 1)),
    { ok: false, code: "MANIFEST_SIGNATURE_INVALID" },
    "another size",
  );
  t.match(
    altered((signed) => delete signed.files["win-x64"]),
    { ok: false, code: "MANIFEST_SIGNATURE_INVALID" },
    "a platform removed",
  );
  t.match(
    altered((signed) => (signed.note = "added")),
    { ok: false, code: "MANIFEST_SIGNATURE_INVALID" },
    "a field added",
  );
  const flipped = JSON.parse(JSON.stringify(manifest));
  const bytes = Buffer.from(flipped.signatures[0].signature, "base64");
  bytes[10]! ^= 1;
  flipped.signatures[0].signature = bytes.toString("base64");
  t.match(verifyManifest(flipped, trusted), { ok: false, code: "MANIFEST_SIGNATURE_INVALID" }, "a signature bit flipped");
  flipped.signatures[0].signature = "not base64 at all!";
  t.match(verifyManifest(flipped, trusted), { ok: false, code: "MANIFEST_SIGNATURE_INVALID" }, "a signature that is not one");
});

t.test("a signature by any other key is not trusted: MANIFEST_UNTRUSTED_KEY", async (t) => {
  const ours = release();
  const theirs = release();
  const manifest = signManifest(body(), [theirs.privateKey]);
  const verdict = verifyManifest(manifest, [publicKeyText(ours.publicKey)]);
  t.match(verdict, { ok: false, code: "MANIFEST_UNTRUSTED_KEY" });
  t.match(verdict, { message: new RegExp(keyIdOf(publicKeyText(ours.publicKey))) }, "names the keys it trusts");
  // Claiming our key id does not help: the signature must verify with our key.
  const forged = { ...manifest, signatures: [{ keyId: keyIdOf(publicKeyText(ours.publicKey)), signature: manifest.signatures[0]!.signature }] };
  t.match(verifyManifest(forged, [publicKeyText(ours.publicKey)]), { ok: false, code: "MANIFEST_SIGNATURE_INVALID" });
  t.match(verifyManifest(manifest, []), { ok: false, code: "MANIFEST_UNTRUSTED_KEY" }, "a build without keys trusts nothing");
});

t.test("key rotation: a release signed by the outgoing and the incoming key verifies for devices trusting either", async (t) => {
  const outgoing = release();
  const incoming = release();
  const both = signManifest(body(), [outgoing.privateKey, incoming.privateKey]);
  t.match(verifyManifest(both, [publicKeyText(outgoing.publicKey)]), { ok: true, keyId: keyIdOf(publicKeyText(outgoing.publicKey)) }, "an old device");
  t.match(verifyManifest(both, [publicKeyText(incoming.publicKey)]), { ok: true, keyId: keyIdOf(publicKeyText(incoming.publicKey)) }, "a new device");
  const next = signManifest(body(), [incoming.privateKey]);
  t.match(
    verifyManifest(next, [publicKeyText(outgoing.publicKey), publicKeyText(incoming.publicKey)]),
    { ok: true },
    "a device built trusting both takes the new key's releases",
  );
  t.match(
    verifyManifest(next, [publicKeyText(outgoing.publicKey)]),
    { ok: false, code: "MANIFEST_UNTRUSTED_KEY" },
    "a device that never learned the new key does not",
  );
});

t.test("malformed manifests are refused before any signature is checked: MANIFEST_INVALID", async (t) => {
  const key = release();
  const trusted = [publicKeyText(key.publicKey)];
  const good = signManifest(body(), [key.privateKey]);
  const cases: Array<[string, unknown]> = [
    ["not an object", "manifest"],
    ["null", null],
    ["no signatures", { signed: good.signed, signatures: [] }],
    ["signatures not a list", { signed: good.signed, signatures: "x" }],
    ["another format", { ...good, signed: { ...good.signed, format: 2 } }],
    ["a version that is not one", { ...good, signed: { ...good.signed, version: "latest" } }],
    ["a file name with a path", { ...good, signed: { ...good.signed, files: { "linux-x64": { file: "../../etc/passwd", size: 1, sha256: "a".repeat(64) } } } }],
    ["a negative size", { ...good, signed: { ...good.signed, files: { "linux-x64": { file: "tether-host-linux-x64", size: -1, sha256: "a".repeat(64) } } } }],
    [
      "a digest that is not hex",
      { ...good, signed: { ...good.signed, files: { "linux-x64": { file: "tether-host-linux-x64", size: 1, sha256: "z".repeat(64) } } } },
    ],
    ["a fraction somewhere", { ...good, signed: { ...good.signed, extra: 0.5 } }],
    ["a signature without a key id", { signed: good.signed, signatures: [{ signature: "x" }] }],
  ];
  for (const [name, manifest] of cases) t.match(verifyManifest(manifest, trusted), { ok: false, code: "MANIFEST_INVALID" }, name);
});
