import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import t from "tap";
import { BUILT_SERVER, startServerProcess } from "../../helpers/services.js";
import { freePort } from "../../helpers/app.js";

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "../../..");

// Once for the file: the tests below run what it emits into dist/.
t.before(() => run("npm", ["run", "-s", "build"], { cwd: ROOT }));

// Teams install Tether as a package and import built JavaScript on plain Node (no tsx, no TypeScript).
t.test("npm run build emits every export, importable on plain Node", async (t) => {
  const manifest = JSON.parse(await readFile(path.join(ROOT, "package.json"), "utf8")) as { exports: Record<string, unknown> };
  const entries = Object.keys(manifest.exports).map((key) => `tether/${key.slice(2)}`);
  t.ok(entries.includes("tether/device") && entries.includes("tether/protocol"), "the device runtime and the protocol are entries");
  const script = `
    for (const entry of ${JSON.stringify(entries)}) {
      const mod = await import(entry);
      console.log(entry, Object.keys(mod).length);
    }`;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], { cwd: ROOT });
  for (const entry of entries) {
    t.match(stdout, new RegExp(`^${entry} [1-9]\\d*$`, "m"), `${entry} exports something`);
  }
});

t.test("the embedding guide's example runs as written", async (t) => {
  const guide = await readFile(path.join(ROOT, "docs/embedding.md"), "utf8");
  const section = guide.slice(guide.indexOf("## The smallest app"));
  const example = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  t.ok(example, "docs/embedding.md has the example");
  // Inside the package folder, so `tether/*` resolves to the built package by its own name.
  const dir = await mkdtemp(path.join(ROOT, ".tmp-example-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, "example.mjs"), example!);

  const port = await freePort();
  const base = `http://localhost:${port}`;
  const child = spawn(process.execPath, ["example.mjs"], {
    cwd: dir,
    env: { ...process.env, PORT: String(port), BETTER_AUTH_URL: base, BETTER_AUTH_SECRET: "example-secret-0123456789abcdef0123456789", DATABASE_URL: "" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  t.teardown(() => child.kill());
  const deadline = Date.now() + 120_000; // generous: a loaded 2-core machine starts slowly
  for (;;) {
    const up = await fetch(`${base}/api/projects`, { redirect: "manual" }).catch(() => undefined);
    if (up) break;
    if (Date.now() > deadline || child.exitCode !== null) throw new Error("example did not start");
    await new Promise((r) => setTimeout(r, 200));
  }
  const anonymous = await fetch(`${base}/api/projects`, { redirect: "manual" });
  t.equal(anonymous.status, 302, "anonymous callers are sent to /login");
  t.equal(anonymous.headers.get("location"), "/login");

  const signUp = await fetch(`${base}/api/auth/sign-up/email`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "Embedder", email: "embedder@example.com", password: "long enough" }),
  });
  t.equal(signUp.status, 200);
  const cookie = signUp.headers.getSetCookie()[0]!.split(";")[0]!;
  const projects = await fetch(`${base}/api/projects`, { headers: { cookie } });
  t.same(await projects.json(), { owner: "embedder@example.com", projects: [] });
});

// The production start (docs/operations.md, "Production start"): migrations, Eta templates and static assets found from dist.
t.test("the built server starts on plain Node: node dist/src/server.js", async (t) => {
  const server = await startServerProcess(t, { NODE_ENV: "production" }, BUILT_SERVER);
  const health = await fetch(`${server.url}/healthz`);
  t.equal(health.status, 200);
  t.same(await health.json(), { status: "ok" }, "migrated on first start, and the database answers");
  const login = await fetch(`${server.url}/login`);
  t.equal(login.status, 200);
  t.match(await login.text(), /<form[^>]*action="\/login"/, "a page rendered from its template");
  const css = await fetch(`${server.url}/assets/app.css`);
  t.equal(css.status, 200);
  t.match(css.headers.get("content-type"), /^text\/css/, "a static asset served");
  t.ok(server.alive(), "still running");
});
