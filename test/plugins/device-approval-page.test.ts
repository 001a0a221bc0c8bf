import t from "tap";
import { hostDeviceAuthorization } from "../../src/plugins/host/device-grant.js";
import { deviceApprovalPage } from "../../src/web/routes/device-approval-page.js";
import { readJson } from "../helpers/client.js";
import { testFetch } from "../helpers/inject.js";
import { aloneBehindGuard, refusesWithout, showsPage, signedUp } from "./bare.js";

const withDeviceGrant = {
  authPlugins: (url: string, db: Parameters<typeof hostDeviceAuthorization>[0]["db"]) => hostDeviceAuthorization({ db, verificationUri: `${url}/device` }),
};

t.test("it declares the renderer it draws the page with", (t) => refusesWithout(t, deviceApprovalPage(), "tether-page-render"));

t.test("deviceApprovalPage alone behind the guard: the owner approves a device's code (RFC 8628)", async (t) => {
  const { url } = await aloneBehindGuard(t, deviceApprovalPage(), withDeviceGrant);
  const owner = await signedUp(url, "device-owner");
  await showsPage(t, owner, "/device", "Connect a device");

  const asked = await testFetch(`${url}/api/auth/device/code`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ client_id: "tether-host", device_name: "build-box", device_platform: "linux-x64", device_version: "0.1.0" }),
  });
  t.equal(asked.status, 200);
  const { user_code: userCode } = (await readJson(asked)) as { user_code: string };
  const shown = await owner.get(`/device?user_code=${userCode.toLowerCase()}`);
  t.equal(shown.status, 200);
  t.match(await shown.text(), "build-box", "the page says what is asking");

  const approved = await owner.request("POST", "/device/approve", { form: { user_code: userCode } });
  t.equal(approved.status, 200);
  t.match(await approved.text(), /approved/i);

  const unknown = await owner.get("/device?user_code=ABCD-EFGH");
  t.equal(unknown.status, 400);
  t.match(await unknown.text(), "That code is not valid.");
});
