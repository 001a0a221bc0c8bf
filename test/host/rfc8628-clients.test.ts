/**
 * RFC 8628 as clients written by others speak it: oauth4webapi (a strict third-party client)
 * discovers the authorization server, asks for a code with nothing but its client id, and polls the
 * token endpoint the metadata names; plain form-encoded HTTP works at both device endpoints. The
 * owner approves on /device as usual, and the device gets its `dt_` credential.
 */
import * as oauth from "oauth4webapi";
import t from "tap";
import { startTestApp } from "../helpers/app.js";
import { readJson, uniqueEmail } from "../helpers/client.js";
import { eventually } from "../helpers/eventually.js";
import { browserClient, HTMX_HEADERS, textOf } from "../pages/support.js";
import { protocolHeaders } from "./helpers.js";

const GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const { url } = await startTestApp(t, { env: { DEVICE_POLL_INTERVAL: "1s" }, redis: Boolean(process.env.TEST_REDIS_URL) });
const insecure = { [oauth.allowInsecureRequests]: true } as const;
const issuer = new URL(`${url}/api/auth`);

async function approve(userCode: string): Promise<{ text: string; owner: ReturnType<typeof browserClient> }> {
  const owner = browserClient(url);
  await owner.signUp(uniqueEmail("rfc8628"));
  const page = await owner.get(`/device?user_code=${userCode}`);
  const text = textOf(await page.text());
  const approved = await owner.request("POST", "/device/approve", { form: { user_code: userCode }, headers: HTMX_HEADERS });
  if (approved.status !== 200) throw new Error(`approve: ${approved.status}`);
  return { text, owner };
}

const helloWith = (token: string) =>
  fetch(`${url}/api/host/hello`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}`, ...protocolHeaders },
    body: JSON.stringify({ tools: [], roots: ["/tmp"] }),
  });

t.test("the metadata names the device authorization endpoint, at the issuer's path and at the origin", async (t) => {
  const atPath = await readJson(await fetch(`${url}/.well-known/oauth-authorization-server/api/auth`));
  t.equal(atPath.device_authorization_endpoint, `${url}/api/auth/device/code`);
  t.ok(atPath.grant_types_supported.includes(GRANT), "the device_code grant is supported");
  const atOrigin = await fetch(`${url}/.well-known/oauth-authorization-server`);
  t.equal(atOrigin.status, 200, "a client that knows only the origin finds it too");
  t.same(await atOrigin.json(), atPath, "the same document");
});

t.test("oauth4webapi: discover, ask for a code with only a client id, poll the token endpoint, get the credential", async (t) => {
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: "oauth2", ...insecure }));
  const client: oauth.Client = { client_id: "tether-host" };
  const asked = await oauth.processDeviceAuthorizationResponse(as, client, await oauth.deviceAuthorizationRequest(as, client, oauth.None(), {}, insecure));
  t.match(asked, { device_code: String, user_code: String, verification_uri: `${url}/device`, interval: 1 });

  const poll = async () =>
    oauth.processDeviceCodeResponse(as, client, await oauth.deviceCodeGrantRequest(as, client, oauth.None(), asked.device_code, insecure));
  /** The OAuth error a refused poll carries (oauth4webapi throws a ResponseBodyError), or "none". */
  const refusal = () =>
    poll().then(
      () => "none",
      (error: unknown) => (error instanceof oauth.ResponseBodyError ? error.error : String(error)),
    );
  t.equal(await refusal(), "authorization_pending", "pending until the owner decides");

  const { text, owner } = await approve(asked.user_code);
  t.match(text, "The device calls itself “Unnamed device”", "a client that names nothing is shown with defaults");
  t.match(text, "Platform unknown");

  let tokens: oauth.TokenEndpointResponse | undefined;
  await eventually(
    async () => {
      try {
        tokens = await poll();
        return true;
      } catch (error) {
        if (error instanceof oauth.ResponseBodyError && (error.error === "authorization_pending" || error.error === "slow_down")) return false;
        throw error;
      }
    },
    15_000,
    "the credential",
  );
  t.match(tokens, { access_token: /^dt_[A-Za-z0-9_-]{43}$/, token_type: "bearer", device_id: String });
  t.equal((await helloWith(tokens!.access_token)).status, 200, "the credential is a device credential");
  t.match(await readJson(await owner.get("/api/host/devices")), { devices: [{ id: tokens!.device_id, name: "Unnamed device", platform: "unknown" }] });
  t.equal(await refusal(), "invalid_grant", "the code is spent");
});

t.test("plain form-encoded HTTP at both device endpoints (RFC 8628 §3.1, §3.4)", async (t) => {
  const form = (path: string, fields: Record<string, string>) =>
    fetch(url + path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(fields) });
  const asked = await form("/api/auth/device/code", { client_id: "tether-host", device_name: "form-box", device_platform: "linux-arm64" });
  t.equal(asked.status, 200);
  const { device_code, user_code } = await readJson(asked);
  const credential = (path: string) => form(path, { grant_type: GRANT, device_code, client_id: "tether-host" });
  const pending = await credential("/api/auth/device/credential");
  t.equal(pending.status, 400, "not 415: the form is read");
  t.match(await pending.json(), { error: "authorization_pending" });

  const { text } = await approve(user_code);
  t.match(text, "The device calls itself “form-box”");
  t.match(text, "Version tether-host unknown", "the version it did not give has its default");
  let body: any;
  await eventually(
    async () => {
      const answer = await credential("/api/auth/device/credential");
      body = await answer.json();
      return answer.status === 200;
    },
    15_000,
    "the credential",
  );
  t.match(body, { access_token: /^dt_/, token_type: "Bearer", device_id: String });
  t.equal((await helloWith(body.access_token)).status, 200);
  const again = await credential("/api/auth/oauth2/token");
  t.equal(again.status, 400);
  t.match(await again.json(), { error: "invalid_grant" }, "the provider's token endpoint knows it is spent too");
});

t.test("the token endpoint takes device codes for tether-host only", async (t) => {
  const other = await fetch(`${url}/api/auth/oauth2/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: GRANT, device_code: "whatever", client_id: "someone-else" }),
  });
  t.equal(other.status, 400);
  t.match(await other.json(), { error: "invalid_client" });
});
