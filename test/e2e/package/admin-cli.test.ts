import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "kysely";
import t from "tap";
import { openDatabase } from "../../../src/db/connect.js";
import { freePort, startTestApp } from "../../helpers/app.js";
import { readJson, TestClient, uniqueEmail } from "../../helpers/client.js";
import { openTestDatabase, TEST_DATABASE_URL } from "../../helpers/database.js";
import { afterSqlChange, cookieOf, newUser, PASSWORD, whoAmI } from "../../helpers/auth.js";

// `npm run admin -- promote|demote|deactivate|reactivate <email>`, run as a real process.

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/** The environment of a fresh shell: none of this test run's database, Redis or auth settings. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(TEST_|DATABASE_URL|REDIS_URL|NODE_ENV|BETTER_AUTH_|TRUSTED_ORIGINS|SSO_|EDGE_SSO_|PORT|HOST|DATA_DIR)/.test(name)) continue;
    env[name] = value;
  }
  return { ...env, ...extra };
}

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the admin command (`node --import tsx src/cli/admin.ts`, or through npm) to completion. */
function admin(args: string[], env: Record<string, string>, via: "node" | "npm" = "node"): Promise<Outcome> {
  const [command, argv] = via === "npm" ? ["npm", ["run", "-s", "admin", "--", ...args]] : [process.execPath, ["--import", "tsx", "src/cli/admin.ts", ...args]];
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { cwd: ROOT, env: cleanEnv(env), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Lines of output, without npm's warnings about this machine's npm configuration. */
const lines = (text: string) => text.split("\n").filter((line) => line.trim() !== "" && !line.startsWith("npm warn"));

t.test("usage", async (t) => {
  const none = await admin([], {}, "npm");
  t.equal(none.code, 2, "npm run admin with no command: exit 2");
  t.match(none.stderr, /Usage: npm run admin -- <command> <email>/, "usage on stderr");
  t.match(none.stderr, /promote <email>/, "listing the commands");
  const extra = await admin(["promote-all", "a@example.com", "b@example.com"], {});
  t.equal(extra.code, 2, "an unknown command with two emails: exit 2");
  t.equal(extra.stdout, "", "nothing on stdout");
});

t.test("the embedded database, while the server holds it and after", async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), "tether-admin-cli-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const url = `http://localhost:${port}`;
  const serverEnv = { DATA_DIR: dataDir, PORT: String(port), BETTER_AUTH_URL: url, LOG_LEVEL: "warn", HOST_BUILD_ON_START: "false" };

  const server: ChildProcess = spawn(process.execPath, ["--import", "tsx", "src/server.ts"], {
    cwd: ROOT,
    env: cleanEnv(serverEnv),
    stdio: ["ignore", "ignore", "pipe"],
  });
  let serverErr = "";
  server.stderr!.on("data", (chunk) => (serverErr += chunk));
  const exited = new Promise<number | null>((resolve) => server.on("exit", (code) => resolve(code)));
  t.teardown(() => {
    if (server.exitCode === null && server.signalCode === null) server.kill("SIGKILL");
  });
  let up = false;
  // Generous: on a loaded 2-core machine tsx compiling the whole app can take well over 30 s.
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline && !up && server.exitCode === null) {
    up = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (!up) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  if (!up) {
    t.fail(`the server did not start: ${serverErr}`);
    return;
  }

  const client = new TestClient(url);
  const email = uniqueEmail("cli");
  await client.signUp(email);
  t.match(await readJson(await client.get("/api/me")), { user: { email, isSiteAdmin: false } });

  const busy = await admin(["promote", email], { DATA_DIR: dataDir });
  t.not(busy.code, 0, "exit non-zero");
  t.equal(lines(busy.stderr).length, 1, "one line");
  t.match(busy.stderr, /in use by the running server \(pid \d+\)/, "which says why");
  t.match(busy.stderr, /stop the server first/, "and what to do");
  t.equal(busy.stdout, "", "nothing on stdout");
  t.match(await readJson(await client.get("/api/me")), { user: { email, isSiteAdmin: false } }, "nothing changed");

  server.kill("SIGTERM");
  t.equal(await exited, 0, "the server stops cleanly");

  const promoted = await admin(["promote", email], { DATA_DIR: dataDir });
  t.equal(promoted.code, 0, `promote: exit 0 ${promoted.stderr}`);
  t.strictSame(lines(promoted.stdout), [`${email} is now a site admin.`]);
  const deactivated = await admin(["deactivate", email.toUpperCase()], { DATA_DIR: dataDir });
  t.equal(deactivated.code, 0, "deactivate (the email in any case): exit 0");
  t.strictSame(lines(deactivated.stdout), [`${email} is deactivated.`]);

  const database = await openDatabase({ kind: "pglite", dataDir });
  try {
    const user = await database.db.selectFrom("user").select(["id", "isSiteAdmin", "deactivatedAt"]).where("email", "=", email).executeTakeFirstOrThrow();
    t.equal(user.isSiteAdmin, true, "promoted in the database");
    t.ok(user.deactivatedAt, "deactivated in the database");
    const sessions = await database.db.selectFrom("session").select("id").where("userId", "=", user.id).execute();
    t.equal(sessions.length, 0, "signed out everywhere");
  } finally {
    await database.close();
  }
});

t.test(
  "PostgreSQL, while a server runs on the same database",
  { skip: TEST_DATABASE_URL ? false : "TEST_DATABASE_URL is not set (the embedded case above still runs)" },
  async (t) => {
    const database = await openTestDatabase();
    t.teardown(() => database.close());
    const schema = (await sql<{ schema: string }>`select current_schema() as schema`.execute(database.db)).rows[0]!.schema;
    const databaseURL = `${TEST_DATABASE_URL}${TEST_DATABASE_URL!.includes("?") ? "&" : "?"}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
    const dataDir = await mkdtemp(path.join(tmpdir(), "tether-admin-cli-pg-"));
    t.teardown(() => rm(dataDir, { recursive: true, force: true }));
    const env = { DATABASE_URL: databaseURL, DATA_DIR: dataDir };

    const { url } = await startTestApp(t, { database });
    const user = await newUser(url, "cli-pg");
    const cookie = { cookie: cookieOf(user.client) };
    const isAdmin = async () => (await readJson(await user.client.get("/api/me")))?.user?.isSiteAdmin;
    const adminAfterChange = (expected: boolean) => afterSqlChange(isAdmin, (value) => value === expected);

    const promote = await admin(["promote", user.email], env);
    t.equal(promote.code, 0, `promote: exit 0 ${promote.stderr}`);
    t.strictSame(lines(promote.stdout), [`${user.email} is now a site admin.`]);
    t.equal(await adminAfterChange(true), true, "the running server sees the promotion");
    t.equal((await user.client.get("/api/admin/users")).status, 200, "and lets the user into the admin API");

    const demote = await admin(["demote", user.email], env);
    t.equal(demote.code, 0, "demote: exit 0");
    t.strictSame(lines(demote.stdout), [`${user.email} is no longer a site admin.`]);
    t.equal(await adminAfterChange(false), false, "the running server sees the demotion");

    const deactivate = await admin(["deactivate", user.email], env);
    t.equal(deactivate.code, 0, "deactivate: exit 0");
    t.equal(
      (
        await afterSqlChange(
          () => whoAmI(url, cookie),
          (r) => r.status === 401,
        )
      ).status,
      401,
      "the live session is anonymous",
    );
    const sessions = await database.db.selectFrom("session").select("id").where("userId", "=", user.id).execute();
    t.equal(sessions.length, 0, "and its row is gone");
    t.equal((await new TestClient(url).signIn(user.email)).status, 403, "sign-in refused");

    const reactivate = await admin(["reactivate", user.email], env);
    t.equal(reactivate.code, 0, "reactivate: exit 0");
    t.strictSame(lines(reactivate.stdout), [`${user.email} is active again.`]);
    const again = new TestClient(url);
    t.equal(
      (
        await afterSqlChange(
          () => again.signIn(user.email, PASSWORD),
          (r) => r.status === 200,
        )
      ).status,
      200,
      "the user can sign in again",
    );

    const nobody = await admin(["deactivate", "nobody@example.com"], env);
    t.equal(nobody.code, 1, "an unknown email: exit 1");
    t.strictSame(lines(nobody.stderr), ["No user with the email nobody@example.com. They must sign up first."]);

    const badUrl = await admin(["promote", user.email], { ...env, DATABASE_URL: "mysql://localhost/x" });
    t.equal(badUrl.code, 1, "a bad DATABASE_URL: exit 1");
    t.match(badUrl.stderr, /DATABASE_URL must be a postgres:\/\/ URL/);
  },
);
