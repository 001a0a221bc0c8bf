import t from "tap";
import { connectedDevice, startHostServer } from "../host/helpers.js";
import { mintToken } from "../helpers/auth.js";
import { eventually } from "../helpers/eventually.js";
import { connectV2, rawModern } from "./v2.js";

/**
 * 2026-07-28's notification stream: `subscriptions/listen` for tools/list_changed, through the official
 * SDK v2 client, counted against the same per-credential stream cap as the 2025 GET stream.
 */
const app = await startHostServer(t, { env: { STREAMS_PER_CREDENTIAL: "2", STREAMS_PER_USER: "3" } });
const { url } = app;
const { owner, deviceId, device } = await connectedDevice(t, url, "box");
device.serve(() => ({ path: ".", type: "directory", size: 0 }));
const token = await mintToken(owner, { name: "listen", scopes: ["host:call"] });

t.test("the SDK v2 client listens at 2026-07-28 and hears tools/list_changed when a device goes offline", async (t) => {
  const client = await connectV2(t, url, token, "2026-07-28");
  t.match(client.getServerCapabilities(), { tools: { listChanged: true } }, "listChanged is advertised at this revision");
  let changes = 0;
  client.setNotificationHandler("notifications/tools/list_changed", () => {
    changes += 1;
  });
  const subscription = await client.listen({ toolsListChanged: true });
  t.same(subscription.honoredFilter, { toolsListChanged: true });
  t.equal(changes, 0, "nothing is sent before a change");

  // A second device of another user changes: this user's stream stays silent.
  const stranger = await connectedDevice(t, url, "elsewhere");
  stranger.device.disconnect();

  device.disconnect();
  await eventually(() => changes > 0, 20_000, "notifications/tools/list_changed on the listen stream");
  const { tools } = await client.listTools();
  t.match(tools.find((tool) => tool.name === "stat")!.inputSchema.properties!.device, { description: new RegExp(`${deviceId} \\(offline\\)`) });
  t.equal(changes, 1, "one change, this user's own: another user's device is not announced here");
  await subscription.close();
  t.equal(await subscription.closed, "local");
});

t.test("listen streams count against the per-credential stream cap, and a revoked token ends them gracefully", async (t) => {
  const capped = await mintToken(owner, { name: "capped", scopes: ["host:call"] });
  const first = await connectV2(t, url, capped, "2026-07-28");
  const a = await first.listen({ toolsListChanged: true });
  const b = await first.listen({ toolsListChanged: true });
  const third = await rawModern(url, capped, "subscriptions/listen", { notifications: { toolsListChanged: true } });
  t.equal(third.status, 429, "a third stream of one token is refused");
  t.match(await third.json(), { code: "TOO_MANY_STREAMS" });

  // A closed stream gives its place back.
  await a.close();
  await eventually(
    async () => {
      const again = await rawModern(url, capped, "subscriptions/listen", { notifications: { toolsListChanged: true } });
      const admitted = again.status === 200;
      await again.body?.cancel();
      return admitted;
    },
    10_000,
    "the freed place to admit a new listen stream",
  );

  const tokens = (await (await owner.get("/api/tokens")).json()) as { tokens: { id: string; name: string }[] };
  const id = tokens.tokens.find((entry) => entry.name === "capped")!.id;
  t.equal((await owner.delete(`/api/tokens/${id}`)).status, 204);
  t.equal(await b.closed, "graceful", "the revoked token's open stream ends with the empty listen response");
});

t.test("a listen request without a filter is a JSON-RPC error; the endpoint answers on", async (t) => {
  const bad = await rawModern(url, token, "subscriptions/listen", {});
  const body = (await bad.json()) as { error?: { code: number } };
  t.equal(body.error?.code, -32602);
  const ok = await rawModern(url, token, "tools/list", {});
  t.equal(ok.status, 200);
});
