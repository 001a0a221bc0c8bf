import t from "tap";
import { devicePages } from "../../src/web/routes/devices-dashboard.js";
import { connectedDevice } from "../host/helpers.js";
import { aloneBehindGuard, refusesWithout, showsPage } from "./bare.js";

t.test("it declares the host plugin whose devices it shows", (t) => refusesWithout(t, devicePages, "tether-host"));

t.test("devicePages alone behind the guard: the owner's devices, and pairing a new one", async (t) => {
  const { url, listen } = await aloneBehindGuard(t, devicePages);
  await listen(); // the connected device holds its call stream open over fetch: a socket, which inject cannot give
  const { owner } = await connectedDevice(t, url);
  owner.defaults.headers = { accept: "text/html" };
  const html = await showsPage(t, owner, "/devices", "Devices");
  t.match(html, "test-device", "the paired device is listed");

  const paired = await owner.request("POST", "/devices/pair");
  t.equal(paired.status, 200);
  t.match(await paired.text(), /TETHER_PAIRING_CODE=[A-Z0-9-]+/, "the page shows how to start a machine with the code");
});
