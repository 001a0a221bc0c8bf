/**
 * Every JSON route Tether owns declares a response schema, and the schema is the whole response: a
 * field added to a device, a proposal or a token later never reaches a client by accident. The routes
 * come from the running app's own inventory, so a JSON route added tomorrow is held to this too.
 */
import t from "tap";
import type { HostService } from "../../src/plugins/host/service.js";
import { startTestApp } from "../helpers/app.js";
import { readJson } from "../helpers/client.js";
import { connectedDevice } from "../host/helpers.js";

const { app, url } = await startTestApp(t);

/** Machine endpoints: the JSON API, the MCP endpoint and its metadata, the health check. */
const MACHINE_ENDPOINT = /^\/(api\/|mcp$|\.well-known\/|healthz$)/;
/** Machine endpoints that are not ours, or whose body is not JSON that Fastify serialises. */
const EXEMPT: Record<string, string> = {
  "/api/auth/*": "better-auth's own handler (out of scope: better-auth owns those responses)",
  "/.well-known/oauth-authorization-server/api/auth": "better-auth's authorization-server metadata, passed through as better-auth answers it",
  "/.well-known/oauth-authorization-server": "the same metadata at the origin's root, for clients that know only the origin",
  "/mcp": "JSON-RPC written by the MCP SDK's transport, sent as bytes",
  "/api/host/stream": "Server-Sent Events",
};

const jsonRoutes = app.tetherRoutes.filter((route) => route.method !== "HEAD" && MACHINE_ENDPOINT.test(route.url) && !(route.url in EXEMPT));

t.test("the inventory holds the JSON routes, and every exemption still names a route", async (t) => {
  const urls = new Set(app.tetherRoutes.map((route) => route.url));
  for (const expected of ["/api/host/devices/:id", "/api/host/calls", "/api/tokens", "/api/me", "/api/admin/users", "/api/host/enroll", "/healthz"]) {
    t.ok(
      jsonRoutes.some((route) => route.url === expected),
      `${expected} is checked`,
    );
  }
  for (const exempt of Object.keys(EXEMPT)) t.ok(urls.has(exempt), `${exempt} exists (${EXEMPT[exempt]})`);
});

t.test("every JSON route we own declares its 2xx response and the shared error body", async (t) => {
  for (const route of jsonRoutes) {
    const name = `${route.method} ${route.url}`;
    t.ok(
      route.responseStatuses.some((status) => /^2(\d\d|xx)$/.test(status)),
      `${name} has a 2xx response schema (has: ${route.responseStatuses.join(", ") || "none"})`,
    );
    t.ok(route.responseStatuses.includes("4xx") && route.responseStatuses.includes("5xx"), `${name} declares its 4xx and 5xx error body`);
  }
});

/**
 * A field a later change adds to what the host service returns (here `tokenHash` and `userId`, the
 * kind of thing a row carries): the service is wrapped in place, so the real routes serve it.
 */
function addFieldsTo(service: HostService, methods: ("device" | "listDevices" | "proposal" | "pendingProposals")[]): void {
  const extra = { tokenHash: "SECRET-HASH", userId: "SECRET-OWNER" };
  const target = service as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const method of methods) {
    const original = target[method]!.bind(service);
    target[method] = async (...args) => {
      const value = await original(...args);
      if (Array.isArray(value)) return value.map((item: object) => ({ ...item, ...extra }));
      // A page of proposals: the extra fields on each of them too.
      const page = value as { proposals?: object[] };
      return { ...page, ...extra, ...(page.proposals ? { proposals: page.proposals.map((item) => ({ ...item, ...extra })) } : {}) };
    };
  }
}

t.test("a field added to a device or a proposal does not leak into the API", async (t) => {
  const { owner, deviceId, device } = await connectedDevice(t, url);
  device.serve((call) => (call.mode === "plan" ? { diff: "--- a\n+++ b\n", summary: "write a" } : { ok: true }));
  const proposed = await owner.post("/api/host/calls", { deviceId, tool: "write_file", input: { path: "a", content: "x" } });
  t.equal(proposed.status, 202, "the mutate call is proposed");
  const { proposalId } = await readJson(proposed);

  addFieldsTo(app.tetherHost, ["device", "listDevices", "proposal", "pendingProposals"]);
  const responses = {
    "GET /api/host/devices/:id": await owner.get(`/api/host/devices/${deviceId}`),
    "GET /api/host/devices": await owner.get("/api/host/devices"),
    "GET /api/host/proposals/:id": await owner.get(`/api/host/proposals/${proposalId}`),
    "GET /api/host/proposals": await owner.get("/api/host/proposals"),
  };
  for (const [name, response] of Object.entries(responses)) {
    t.equal(response.status, 200, name);
    const text = await response.text();
    t.notMatch(text, /SECRET|tokenHash|userId/, `${name} sends only the declared fields`);
    t.match(text, deviceId, `${name} still sends the device's data`);
  }
});
