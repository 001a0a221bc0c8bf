/**
 * Home is the dashboard: the owner's devices and whether each is online, the changes waiting for approval
 * (also counted in the navigation of every page), recent activity, and how to connect an agent.
 */
import t from "tap";
import { makeSiteAdmin } from "../helpers/auth.js";
import { connectedDevice, pair, signedIn, startHostServer } from "../host/helpers.js";
import { textOf } from "./support.js";

const server = await startHostServer(t);
const html = { accept: "text/html" };

t.test("a new account: no devices yet, a way to connect one, nothing waiting, how to connect an agent", async (t) => {
  const owner = await signedIn(server.url);
  await server.app.tetherActivity.flush(); // the sign-up's event is written in a batch
  const page = await owner.get("/home", html);
  t.equal(page.status, 200);
  const body = await page.text();
  const text = textOf(body);
  t.match(text, "No devices yet.");
  t.match(body, 'href="/devices#downloads-heading"');
  t.match(text, "Nothing waits for your approval.");
  t.match(text, `through ${server.url}/mcp`);
  t.match(body, 'href="/settings/mcp"');
  t.match(text, "Recent activity");
  t.match(text, /Account created [^·]*from (127\.0\.0\.1|::1|::ffff:127\.0\.0\.1)/, "an account event says where it came from, in its details");
  t.match(body, '<a href="/devices">Devices</a>', "no count in the navigation when nothing waits");
});

t.test("devices online and offline, the changes waiting with a link, recent activity; the navigation counts the changes", async (t) => {
  const { owner, deviceId, device } = await connectedDevice(t, server.url, "ada-laptop");
  await pair(owner, "build-box"); // paired, never connected
  device.serve((call) => ({ diff: `--- a/${call.input.path}\n+++ b/${call.input.path}\n@@ -0,0 +1 @@\n+x\n`, summary: `write ${call.input.path}` }));
  for (const path of ["a.txt", "b.txt"]) {
    const proposed = await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path, content: "x" } });
    t.equal(proposed.status, 202, `${path} proposed`);
  }

  await server.app.tetherAudit.flush(); // the audit log is written in batches
  const body = await (await owner.get("/home", html)).text();
  const text = textOf(body);
  t.match(text, "1 of 2 online.");
  t.match(text, /ada-laptop test Online/);
  t.match(text, /build-box test Offline last seen never/);
  t.match(text, "2 changes wait for your approval.");
  t.match(body, '<a class="button button-primary" href="/devices#proposals-heading">Review them</a>');
  t.match(text, "Recent activity");
  t.match(body, 'href="/settings/activity"');
  const recent = body.slice(body.indexOf('id="home-activity-heading"'));
  t.match(recent, /<tr data-event="propose">/, "device events are among the recent ones");
  t.notMatch(recent, /IP address|Browser<\/th>|<td[^>]*>—<\/td>/, "no columns of dashes: devices and agents have no browser");
  const full = await (await owner.get("/settings/activity", html)).text();
  t.match(full, '<th scope="col">IP address</th>', "the full log keeps the address column for the account events that have one");
  t.match(full, /<tr data-event="propose">[\s\S]*?<td class="nowrap">—<\/td>/, "where a device event shows as having none");
  await makeSiteAdmin(server.app, owner.userId);
  const proposals = await (await owner.get("/admin/activity?event=propose", html)).text();
  t.match(proposals, /<tr data-event="propose">/);
  t.notMatch(proposals, /IP address|Browser<\/th>|<td[^>]*>—<\/td>/, "a page of device events alone has no address or browser columns");
  t.match(body, /<a href="\/home" aria-current="page">Home<\/a>/);
  t.match(
    body,
    /<a href="\/devices">Devices <span class="badge badge-accent nav-count"[^>]*>2<span class="visually-hidden"> changes waiting for approval<\/span><\/span><\/a>/,
    "the navigation shows the count",
  );

  const tokens = await (await owner.get("/settings/tokens", html)).text();
  t.match(tokens, /nav-count[^>]*>2</, "on every signed-in page");
  const fragment = await (await owner.get("/devices/panel/devices", { ...html, "hx-request": "true" })).text();
  t.notMatch(fragment, /nav-count/, "not on fragments");
});
