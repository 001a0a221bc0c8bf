/**
 * One plugin at a time on a bare `Fastify()`, as the official @fastify/* plugins are tested: the
 * test names the plugins its subject declares in `dependencies` and nothing else is registered (never
 * the example app's `buildApp`). Requests reach it through `app.inject` (test/helpers/inject.ts) unless the
 * test calls `listen()` because it needs a socket; a real database (PGlite, or a schema of its own on
 * TEST_DATABASE_URL), a real better-auth.
 */
import cookie from "@fastify/cookie";
import formbody from "@fastify/formbody";
import type { BetterAuthPlugin } from "better-auth";
import Fastify, { type FastifyInstance, type FastifyPluginAsync, type FastifyPluginCallback } from "fastify";
import tap, { type Test } from "tap";
import type { DatabaseHandle } from "../../src/db/connect.js";
import { dbPlugin } from "../../src/db/db-plugin.js";
import { errorHandlerPlugin } from "../../src/http/error-handler.js";
import { streamLimitsPlugin } from "../../src/http/stream-limits.js";
import { activityPlugin } from "../../src/plugins/activity/activity-plugin.js";
import { createActivityWriter } from "../../src/plugins/activity/writer.js";
import { auditPlugin, createAuditWriter } from "../../src/plugins/activity/audit-plugin.js";
import { authPlugin } from "../../src/plugins/auth/auth-plugin.js";
import { createAuth, type Auth } from "../../src/plugins/auth/create-auth.js";
import { originGuardPlugin } from "../../src/plugins/auth/origin-guard.js";
import { hostPlugin } from "../../src/plugins/host/host-plugin.js";
import { sessionPlugin } from "../../src/plugins/session/session-plugin.js";
import { assetsPlugin } from "../../src/web/assets.js";
import { guardedPagesPlugin } from "../../src/web/guard.js";
import { pagesPlugin } from "../../src/web/index.js";
import { renderPlugin } from "../../src/web/render.js";
import { closeListening, freePort, TEST_SECRET } from "../helpers/app.js";
import { TestClient, uniqueEmail } from "../helpers/client.js";
import { servedThroughInject, serveThroughInject, testFetch } from "../helpers/inject.js";
import { openTestDatabase } from "../helpers/database.js";

/** A plugin another one may declare in `dependencies`, by the name it registers under. */
export type Dependency =
  | "tether-errors"
  | "@fastify/cookie"
  | "@fastify/formbody"
  | "tether-db"
  | "tether-audit"
  | "tether-origin-guard"
  | "tether-auth"
  | "tether-session"
  | "tether-activity"
  | "tether-streams"
  | "tether-host"
  | "tether-page-assets"
  | "tether-page-render"
  | "tether-pages";

interface Context {
  url: string;
  db: DatabaseHandle["db"];
  auth: Auth;
}

type AnyPlugin = FastifyPluginAsync<any> | FastifyPluginCallback<any>;

/** Each dependency's plugin and the options an app gives it, in the order an app registers them. */
const PROVIDERS: Record<Dependency, { plugin: AnyPlugin; options?: (context: Context, app: FastifyInstance) => object }> = {
  "tether-errors": { plugin: errorHandlerPlugin },
  "@fastify/cookie": { plugin: cookie },
  "@fastify/formbody": { plugin: formbody },
  "tether-db": { plugin: dbPlugin, options: ({ db }) => ({ db }) },
  "tether-audit": { plugin: auditPlugin },
  "tether-origin-guard": { plugin: originGuardPlugin, options: ({ url }) => ({ trustedOrigins: [url] }) },
  "tether-auth": { plugin: authPlugin, options: ({ auth }) => ({ auth }) },
  "tether-session": { plugin: sessionPlugin },
  "tether-activity": {
    plugin: activityPlugin,
    options: ({ db }, app) => ({ writer: createActivityWriter(createAuditWriter(db, { onError: (error) => app.log.error(error) })) }),
  },
  "tether-streams": { plugin: streamLimitsPlugin },
  "tether-host": { plugin: hostPlugin },
  "tether-page-assets": { plugin: assetsPlugin },
  "tether-page-render": { plugin: renderPlugin },
  "tether-pages": { plugin: pagesPlugin },
};
const ORDER = Object.keys(PROVIDERS) as Dependency[];

/** The `dependencies` a plugin declares through fastify-plugin. */
export function declaredDependencies(plugin: AnyPlugin): string[] {
  return (plugin as unknown as Record<symbol, { dependencies?: string[] } | undefined>)[Symbol.for("plugin-meta")]?.dependencies ?? [];
}

function pluginName(plugin: AnyPlugin): string | undefined {
  return (plugin as unknown as Record<symbol, { name?: string } | undefined>)[Symbol.for("plugin-meta")]?.name;
}

/** `names` and everything they declare in turn (a dependency cannot load without its own). */
function withTheirDependencies(names: string[], leaveOut?: string): Set<Dependency> {
  const found = new Set<Dependency>();
  const visit = (name: string) => {
    if (name === leaveOut || found.has(name as Dependency)) return;
    if (!(name in PROVIDERS)) throw new Error(`bare.ts does not know how to register "${name}"`);
    found.add(name as Dependency);
    declaredDependencies(PROVIDERS[name as Dependency].plugin).forEach(visit);
  };
  names.forEach(visit);
  return found;
}

let database: Promise<DatabaseHandle> | undefined;
/**
 * One database per test file, opened on first use and closed when the file ends. Forgotten at close, so the
 * next file in the same process (`npm test` runs an area's files in one) opens its own.
 */
export function fileDatabase(): Promise<DatabaseHandle> {
  if (!database) {
    const opened = (database = openTestDatabase());
    tap.teardown(async () => {
      if (database === opened) database = undefined;
      await (await opened).close();
    });
  }
  return database;
}

export interface BareApp {
  app: FastifyInstance;
  /** `http://localhost:<port>`: the auth base URL and the one trusted origin (served through inject until `listen()`). */
  url: string;
  /** The file's database and a better-auth on it: only when something registered keeps data. */
  db: DatabaseHandle["db"];
  auth: Auth;
  /**
   * Starts listening on the app's port (after the test has registered its subject), for a test that needs a
   * socket (streams, connection behaviour, a client that must connect over HTTP): from then on every request
   * to `url`, the test's and its clients', goes over loopback.
   */
  listen(this: void): Promise<void>;
}

/**
 * A bare `Fastify()` with `dependencies` (and theirs, leaving out `leaveOut`) registered in app order;
 * closed at the end of `t`.
 */
export interface BareOptions {
  /** better-auth plugins for the app's auth (e.g. the MCP OAuth provider), given the base URL and database. */
  authPlugins?: (url: string, db: DatabaseHandle["db"]) => BetterAuthPlugin[];
}

export async function bareFastify(t: Test, dependencies: string[], leaveOut?: string, options: BareOptions = {}): Promise<BareApp> {
  // An app served through inject holds no port, so the OS may offer its port again: skip one still in use.
  let port = await freePort();
  while (servedThroughInject(`http://localhost:${port}`)) port = await freePort();
  const url = `http://localhost:${port}`;
  const wanted = withTheirDependencies(dependencies, leaveOut);
  // Only plugins that keep data need the database (opening one costs a migration run).
  const stores = wanted.has("tether-db") || wanted.has("tether-auth");
  const db = stores ? (await fileDatabase()).db : (undefined as unknown as BareApp["db"]);
  const auth = stores ? createAuth({ db, baseURL: url, secret: TEST_SECRET, plugins: options.authPlugins?.(url, db) ?? [] }) : (undefined as unknown as Auth);
  const app = Fastify();
  const stopInject = serveThroughInject(url, app);
  t.teardown(() => {
    stopInject();
    return closeListening(app).catch(() => {});
  });
  for (const name of ORDER) {
    if (!wanted.has(name)) continue;
    const { plugin, options } = PROVIDERS[name];
    await app.register(plugin, options?.({ url, db, auth }, app) ?? {});
  }
  const listen = async () => {
    stopInject();
    await app.listen({ port, host: "127.0.0.1" });
  };
  return { app, url, db, auth, listen };
}

/**
 * `plugin` on a bare Fastify with only what it declares in `dependencies` (and `routes`, the test's own,
 * added after it), ready (served through inject: `listen()` it for a socket); closed at the end of `t`.
 */
export async function alone(t: Test, plugin: AnyPlugin, options: object = {}, routes?: (app: FastifyInstance) => void): Promise<BareApp> {
  const bare = await bareFastify(t, declaredDependencies(plugin));
  await bare.app.register(plugin, options);
  routes?.(bare.app);
  await bare.app.ready();
  return bare;
}

/** Signed-in `page` alone behind the route guard (the one way an app adds such pages), ready (as `alone`). */
export async function aloneBehindGuard(t: Test, page: AnyPlugin, options: BareOptions = {}): Promise<BareApp> {
  const bare = await bareFastify(t, [...declaredDependencies(page), ...declaredDependencies(guardedPagesPlugin)], undefined, options);
  await bare.app.register(guardedPagesPlugin, { pages: [page] });
  await bare.app.ready();
  return bare;
}

/**
 * Loading `plugin` with every dependency it declares but `missing` fails with Fastify's dependency
 * check, naming what is missing: a plugin that needs something says so up front, not in someone's app.
 */
export async function refusesWithout(t: Test, plugin: AnyPlugin, missing: Dependency, options: object = {}): Promise<void> {
  t.ok(declaredDependencies(plugin).includes(missing), `it declares ${missing}`);
  const { app } = await bareFastify(t, declaredDependencies(plugin), missing);
  const outcome = await app.register(plugin, options).then(
    () => "loaded",
    (error: Error) => error,
  );
  t.match(
    outcome,
    { code: "FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED", message: `The dependency '${missing}' of plugin '${pluginName(plugin)}' is not registered` },
    `refuses to load without ${missing}`,
  );
}

/** A new user signed up through the bare app's own auth API: a browser-like client holding the cookie. */
export async function signedUp(url: string, label = "bare"): Promise<TestClient & { userId: string }> {
  const client = new TestClient(url, { headers: { accept: "text/html" } }) as TestClient & { userId: string };
  client.userId = await client.signUp(uniqueEmail(label.replace(/\W+/g, "-").toLowerCase()), undefined, label);
  return client;
}

/**
 * A signed-in page as its user sees it: anonymous visitors are sent to sign in, `user` gets the page
 * (HTML, never cached, titled `heading`). Returns the page's HTML.
 */
export async function showsPage(t: Test, user: TestClient, path: string, heading: string): Promise<string> {
  const anonymous = await testFetch(user.baseURL + path, { redirect: "manual", headers: { accept: "text/html" } });
  t.equal(anonymous.status, 302, `${path}: anonymous visitors are sent to sign in`);
  t.equal(anonymous.headers.get("location"), path === "/home" ? "/login" : `/login?next=${encodeURIComponent(path)}`);
  const page = await user.get(path);
  t.equal(page.status, 200, `${path}: the signed-in user gets the page`);
  t.equal(page.headers.get("cache-control"), "no-store");
  const html = await page.text();
  t.match(html, `<h1>${heading}</h1>`);
  return html;
}
