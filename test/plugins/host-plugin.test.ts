import t from "tap";
import { hostPlugin } from "../../src/plugins/host/host-plugin.js";
import { bare, bearer } from "../helpers/auth.js";
import { connectedDevice } from "../host/helpers.js";
import { alone, refusesWithout } from "./bare.js";

t.test("it declares the audit log it writes every call to", (t) => refusesWithout(t, hostPlugin, "tether-audit"));

t.test("hostPlugin alone: pair a device, see it online, call one of its tools", async (t) => {
  const { app, url, listen } = await alone(t, hostPlugin, { callTimeoutMs: 5_000 });
  await listen(); // the scripted device holds its call stream open over fetch: a socket, which inject cannot give
  t.equal((await bare(url, "/api/host/devices")).status, 401);

  const { owner, deviceId, device } = await connectedDevice(t, url);
  device.serve((call) => ({ size: 42, path: call.input.path }));
  const listed = (await (await owner.get("/api/host/devices")).json()) as { devices: Array<{ id: string; online: boolean }> };
  t.match(listed.devices, [{ id: deviceId, online: true }]);

  const called = await owner.post("/api/host/calls", { deviceId, tool: "stat", input: { path: "notes.txt" } });
  t.equal(called.status, 200);
  t.match(await called.json(), { tool: "stat", class: "read", result: { size: 42, path: "notes.txt" } });
  await app.tetherAudit.flush();
  const audited = await app.tetherDb
    .selectFrom("activity_event")
    .select(["event", "tool", "outcome"])
    .where("device_id", "=", deviceId)
    .where("event", "=", "call")
    .execute();
  t.same(audited, [{ event: "call", tool: "stat", outcome: "ok" }], "the call is in the audit log");

  const unknown = await owner.post("/api/host/calls", { deviceId, tool: "no_such_tool" });
  t.equal(unknown.status, 400);
  t.match(await unknown.json(), { code: "UNKNOWN_TOOL", message: String }, "a tool the device never announced");

  const { token } = await app.tetherApiTokens.create({ userId: owner.userId, name: "no scope for calls", scopes: ["other"] });
  const scoped = await bare(
    url,
    "/api/host/calls",
    { ...bearer(token), "content-type": "application/json" },
    { method: "POST", body: JSON.stringify({ deviceId, tool: "stat" }) },
  );
  t.equal(scoped.status, 401, "a token needs the host:call scope");
});
