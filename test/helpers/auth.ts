import { randomInt } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { Kysely } from "kysely";
import type { Test } from "tap";
import type { Database } from "../../src/db/schema.js";
import { userAdmin } from "../../src/plugins/auth/user-admin.js";
import { TestClient, uniqueEmail } from "./client.js";
import { eventually } from "./eventually.js";
import { testFetch } from "./inject.js";
import { IN_CI, TEST_DATABASE_URL, TEST_REDIS_URL } from "./database.js";

/** better-auth's session cookie name for an http base URL. */
export const SESSION_COOKIE = "better-auth.session_token";
export const PASSWORD = "correct horse battery";

export interface User {
  client: TestClient;
  id: string;
  email: string;
}

/** The app (or bare Fastify) whose users a test changes: its better-auth and database. */
export type UsersOf = Pick<FastifyInstance, "tetherAuth" | "tetherDb">;

/** Makes a user a site admin the way the admin pages and CLI do (so every session cache hears of it). */
export async function makeSiteAdmin(app: UsersOf, userId: string): Promise<void> {
  await userAdmin(app.tetherAuth, app.tetherDb).setSiteAdmin(userId, true);
}

/** A new user, signed up (and so signed in) through the API; a site admin of `adminOf` when given. */
export async function newUser(url: string, label = "user", options: { adminOf?: UsersOf } = {}): Promise<User> {
  const client = new TestClient(url);
  const email = uniqueEmail(label);
  const id = await client.signUp(email, PASSWORD, label);
  if (options.adminOf) await makeSiteAdmin(options.adminOf, id);
  return { client, id, email };
}

/** Creates an API token through the JSON API with the user's cookie session; returns the `sk_…` value. */
export async function mintToken(client: TestClient, input: { name?: string; scopes?: string[]; expiresInDays?: number } = {}): Promise<string> {
  const response = await client.post("/api/tokens", { name: "test token", ...input });
  if (response.status !== 201) throw new Error(`token: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { token: string }).token;
}

/** A request with nothing but the given headers (no cookie jar, no Origin); through inject when `url` is served so. */
export function bare(url: string, path: string, headers: Record<string, string> = {}, init: RequestInit = {}): Promise<Response> {
  return testFetch(url + path, { redirect: "manual", ...init, headers: { ...headers, ...(init.headers as Record<string, string> | undefined) } });
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** The user id `/api/me` reports for these headers, or the status when it is not 200. */
export async function whoAmI(url: string, headers: Record<string, string>): Promise<{ status: number; id?: string; via?: string }> {
  const response = await bare(url, "/api/me", headers);
  if (response.status !== 200) {
    await response.arrayBuffer();
    return { status: response.status };
  }
  const json = (await response.json()) as { user: { id: string }; via: string };
  return { status: 200, id: json.user.id, via: json.via };
}

/** A client address no earlier run used, so counters in a shared Redis never interfere. */
export function randomClientIp(): string {
  return `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;
}

/** The session cookie as a Cookie header, taken from a client's jar. */
export function cookieOf(client: TestClient): string {
  const value = client.cookies.get(SESSION_COOKIE);
  if (!value) throw new Error("no session cookie in the jar");
  return `${SESSION_COOKIE}=${value}`;
}

/** The attributes of the session cookie in a response's Set-Cookie headers (lower-cased names). */
export function sessionSetCookie(response: Response): { value: string; attributes: Map<string, string> } | undefined {
  const line = response.headers.getSetCookie().find((c) => c.startsWith(`${SESSION_COOKIE}=`));
  if (!line) return undefined;
  const [pair, ...rest] = line.split(";");
  const attributes = new Map<string, string>();
  for (const part of rest) {
    const [name, ...value] = part.trim().split("=");
    attributes.set(name!.toLowerCase(), value.join("="));
  }
  return { value: pair!.slice(pair!.indexOf("=") + 1), attributes };
}

/**
 * Tests that need Redis: with TEST_REDIS_URL unset they fail in CI (where Redis must be there) and are
 * skipped with a printed reason elsewhere.
 */
export function redisTest(t: Test, name: string, fn: (t: Test) => Promise<void>): void {
  if (TEST_REDIS_URL) {
    t.test(name, fn);
  } else if (IN_CI) {
    t.test(name, async (t) => {
      t.fail("TEST_REDIS_URL is not set, but CI must run the Redis tests");
    });
  } else {
    t.test(name, { skip: "TEST_REDIS_URL is not set (set it to run the Redis tests)" }, fn);
  }
}

/**
 * The first answer after a change made with plain SQL on another connection. The app's session cache
 * hears of such changes through LISTEN/NOTIFY. PGlite runs in this process and delivers the
 * notification before the statement returns, so there the very next request must already see the
 * change: one probe, no retry. A PostgreSQL server delivers it asynchronously (measured: usually well
 * under a millisecond, up to ~80 ms under load), so there the probe is repeated until `settled` or
 * 3 s have passed; the caller asserts on the returned value either way, so a change the app never
 * hears of still fails.
 */
export async function afterSqlChange<T>(probe: () => Promise<T>, settled: (value: T) => boolean): Promise<T> {
  let value = await probe();
  if (!TEST_DATABASE_URL || settled(value)) return value;
  // Not settling is the caller's to assert, on the value it gets back: the wait's own timeout is not the failure.
  await eventually(async () => settled((value = await probe())), 3_000, "the change to reach the app", 10).catch(() => {});
  return value;
}

/** `whoAmI` after an out-of-band SQL change, expecting `status`. */
export const statusAfterSqlChange = async (url: string, headers: Record<string, string>, status: number) =>
  (
    await afterSqlChange(
      () => whoAmI(url, headers),
      (r) => r.status === status,
    )
  ).status;

/**
 * The token of the newest password-reset link, read where better-auth keeps it (no mail is sent in tests):
 * what the emailed link would carry, for the reset that was just requested.
 */
export async function latestResetToken(db: Kysely<Database>): Promise<string> {
  const row = await db
    .selectFrom("verification")
    .select("identifier")
    .where("identifier", "like", "reset-password:%")
    .orderBy("createdAt", "desc")
    .executeTakeFirstOrThrow();
  return row.identifier.slice("reset-password:".length);
}
