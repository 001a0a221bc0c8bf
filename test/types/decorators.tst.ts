/**
 * The decorators each package entry adds, as an embedding app sees them: importing the entry is enough for
 * `fastify.tether…`, `request.getSession()` and `reply.tetherRender()` to be typed (declaration merging), and
 * wrong uses are type errors. Imports go through the entries' index files only, as `tether/<entry>` would.
 * `npm run test:types` runs this with TSTyche (as `@fastify/cookie` tests its types).
 */
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import type { Kysely } from "kysely";
import { describe, expect, test } from "tstyche";
import * as activityEntry from "../../src/plugins/activity/index.js";
import type { ActivityService } from "../../src/plugins/activity/index.js";
import { authPlugin, type Auth } from "../../src/plugins/auth/index.js";
import * as authEntry from "../../src/plugins/auth/index.js";
import type { Database, NotificationSource } from "../../src/db/index.js";
import type { ErrorPageRenderer, StreamLimiter } from "../../src/http/index.js";
import { HOST_ERROR_CODES, hostPlugin, type DownloadCatalog, type HostService } from "../../src/plugins/host/index.js";
import * as hostEntry from "../../src/plugins/host/index.js";
import { mcpPlugin } from "../../src/plugins/mcp/index.js";
import { SCOPES, type ApiTokenService, type ResolvedSession, type UiSession, type UiUser } from "../../src/plugins/session/index.js";
import * as sessionEntry from "../../src/plugins/session/index.js";
import type { AssetUrls } from "../../src/web/index.js";

const app = Fastify();
declare const request: FastifyRequest;
declare const reply: FastifyReply;

describe("tether/db", () => {
  test("fastify.tetherDb and tetherDbListen", () => {
    expect(app.tetherDb).type.toBe<Kysely<Database>>();
    expect(app.tetherDbListen).type.toBe<NotificationSource | null>();
  });
});

describe("tether/http", () => {
  test("fastify.tetherErrorPages and tetherStreams", () => {
    expect(app.tetherErrorPages).type.toBe<ErrorPageRenderer | null>();
    expect(app.tetherStreams).type.toBe<StreamLimiter>();
  });
  test("the old name is gone", () => {
    expect(app).type.not.toHaveProperty("errorPageRenderer");
  });
});

describe("tether/auth", () => {
  test("fastify.tetherAuth is the small, explicit Auth type", () => {
    expect(app.tetherAuth).type.toBe<Auth>();
    expect(app.tetherAuth.options.baseURL).type.toBe<string>();
    expect(app.tetherAuth.handler(new Request("http://localhost/api/auth/ok"))).type.toBe<Promise<Response>>();
  });
  test("tetherCallAuth, tetherEdgeSsoEnabled, tetherPasskeysEnabled", () => {
    expect(app.tetherCallAuth(request, reply, { method: "POST", path: "/sign-out" })).type.toBe<Promise<Response>>();
    expect(app.tetherCallAuth(request, reply, { method: "PUT", path: "/sign-out" })).type.toRaiseError();
    expect(app.tetherEdgeSsoEnabled()).type.toBe<boolean>();
    expect(app.tetherPasskeysEnabled()).type.toBe<boolean>();
    expect(app).type.not.toHaveProperty("getEdgeSsoEnabled");
  });
  test("authPlugin needs the auth instance", () => {
    expect(app.register(authPlugin, {})).type.toRaiseError();
  });
  test("the entry exports no internals", () => {
    expect(authEntry).type.not.toHaveProperty("judgeOrigin");
    expect(authEntry).type.not.toHaveProperty("SESSION_EXPIRES_IN_SECONDS");
  });
});

describe("tether/session", () => {
  test("the seed's request decorators", () => {
    expect(request.getSession()).type.toBe<Promise<ResolvedSession | null>>();
    expect(request.requireSession({ requiredScope: SCOPES.hostCall })).type.toBe<Promise<ResolvedSession>>();
    expect(request.requireSiteAdmin({ requiredScope: SCOPES.admin })).type.toBe<Promise<ResolvedSession>>();
    expect(request.fetchSession()).type.toBe<Promise<UiSession | null>>();
    expect(request.getApiToken()).type.toBe<Promise<{ id: string; scopes: string[] } | null>>();
    expect(app.tetherApiTokens).type.toBe<ApiTokenService>();
  });
  test("wrong uses are errors", () => {
    expect(request.getSession({ requiredScope: 42 })).type.toRaiseError();
    expect(request.requireSession({ scope: "admin" })).type.toRaiseError();
    expect(request.fetchSession({ requiredScope: "admin" })).type.toRaiseError();
    expect(request.getSession().user).type.toRaiseError();
  });
  test("scope names come from one table", () => {
    expect(SCOPES.hostCall).type.toBe<"host:call">();
    expect(SCOPES).type.not.toHaveProperty("unknown");
  });
  test("the entry exports no internals", () => {
    expect(sessionEntry).type.not.toHaveProperty("verifyApiToken");
    expect(sessionEntry).type.not.toHaveProperty("createSessionResolver");
  });
});

describe("tether/activity", () => {
  test("fastify.tetherActivity and tetherAudit", () => {
    expect(app.tetherActivity).type.toBe<ActivityService>();
    expect(app.tetherAudit.flush()).type.toBe<Promise<void>>();
    const writer = activityEntry.createActivityWriter(activityEntry.createAuditWriter(app.tetherDb));
    expect(writer.record({ userId: "u", event: "sign-in", actor: "session", outcome: "ok" })).type.toBe<void>();
    expect(writer.record({ userId: "u", event: "no-such-event", actor: "session", outcome: "ok" })).type.toRaiseError();
  });
});

describe("tether/web", () => {
  test("reply.tetherRender, fastify.tetherAssets, request.tetherUser", () => {
    expect(reply.tetherRender("home", { title: "Home" })).type.toBe<FastifyReply>();
    expect(app.tetherAssets).type.toBe<AssetUrls>();
    expect(request.tetherUser).type.toBe<UiUser | null>();
  });
  test("wrong uses, and the old names, are errors", () => {
    expect(reply.tetherRender(42)).type.toRaiseError();
    expect(reply.render("home")).type.toRaiseError();
    expect(app).type.not.toHaveProperty("assetUrls");
  });
});

describe("tether/host", () => {
  test("fastify.tetherHost, tetherHostDownloads, tetherHostMinimumVersion", () => {
    expect(app.tetherHost).type.toBe<HostService>();
    expect(app.tetherHostDownloads).type.toBe<DownloadCatalog>();
    expect(app.tetherHostMinimumVersion).type.toBe<string | undefined>();
  });
  test("its options are checked", () => {
    expect(app.register(hostPlugin, { redis: { url: 42 } })).type.toRaiseError();
    expect(app.register(mcpPlugin, { resourceURL: 42 })).type.toRaiseError();
  });
  test("the error codes table", () => {
    expect(HOST_ERROR_CODES.DEVICE_OFFLINE).type.toBe<number>();
    expect(HOST_ERROR_CODES.NOT_A_CODE).type.toRaiseError();
  });
  test("the entry re-exports neither the repositories nor the protocol", () => {
    expect(hostEntry).type.not.toHaveProperty("devices");
    expect(hostEntry).type.not.toHaveProperty("proposals");
    expect(hostEntry).type.not.toHaveProperty("audit");
    expect(hostEntry).type.not.toHaveProperty("PROTOCOL_VERSION");
  });
});
