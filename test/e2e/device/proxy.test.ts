/**
 * A device that reaches the server only through an HTTP proxy: Debian's tinyproxy, started here on a
 * free port with its own configuration and log, carries the real executable's traffic (enrollment by
 * device authorization, the event stream, results), and its log shows it. NO_PROXY bypasses it.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { freePort } from "../../helpers/app.js";
import { IN_CI } from "../../helpers/database.js";
import { approvalPrompt, builtExecutable, startHost } from "../../host/executable.js";
import { signedIn, startHostServer } from "../../host/helpers.js";
import { eventually } from "../../helpers/eventually.js";
import { readJson } from "../../helpers/client.js";

const TINYPROXY = "/usr/bin/tinyproxy";

if (!existsSync(TINYPROXY) && !IN_CI) {
  t.plan(0, `skip: ${TINYPROXY} is missing (apt-get install -y tinyproxy)`);
} else {
  const executable = await builtExecutable(t);

  t.test("enrollment, the stream and results flow through tinyproxy; NO_PROXY bypasses it", async (t) => {
    const work = await mkdtemp(path.join(os.tmpdir(), "tether-proxy-"));
    t.teardown(() => rm(work, { recursive: true, force: true }));
    const root = path.join(work, "project");
    await mkdir(root);
    await writeFile(path.join(root, "notes.txt"), "through the proxy\n");

    const proxyPort = await freePort();
    const proxyLog = path.join(work, "tinyproxy.log");
    const config = path.join(work, "tinyproxy.conf");
    await writeFile(
      config,
      [`Port ${proxyPort}`, "Listen 127.0.0.1", "Timeout 600", `LogFile "${proxyLog}"`, "LogLevel Info", "MaxClients 20", "Allow 127.0.0.1", ""].join("\n"),
    );
    const proxy = spawn(TINYPROXY, ["-d", "-c", config], { stdio: "ignore" });
    t.teardown(() => {
      if (proxy.exitCode === null) proxy.kill("SIGTERM");
    });
    await eventually(async () => (await readFile(proxyLog, "utf8").catch(() => "")).includes("listening"), 10_000, "tinyproxy listening");
    const logged = async () => readFile(proxyLog, "utf8");

    const app = await startHostServer(t, { env: { DEVICE_POLL_INTERVAL: "1s" } });
    const serverPath = (rest: string) => `${app.url}${rest}`;
    const owner = await signedIn(app.url);
    const env = { TETHER_SERVER_URL: app.url, TETHER_ROOTS: root, HTTP_PROXY: `http://127.0.0.1:${proxyPort}`, HTTPS_PROXY: `http://127.0.0.1:${proxyPort}` };

    const host = startHost(executable, { ...env, TETHER_CONFIG_DIR: path.join(work, "config-a"), TETHER_DEVICE_NAME: "proxied-box" }, work);
    t.teardown(() => {
      if (host.child.exitCode === null) host.child.kill("SIGKILL");
    });
    await host.waitFor(new RegExp(`using proxy http://127.0.0.1:${proxyPort}`));
    const { userCode } = await approvalPrompt(host);
    t.equal((await owner.get(`/device?user_code=${userCode}`)).status, 200);
    t.equal((await owner.request("POST", "/device/approve", { form: { user_code: userCode } })).status, 200);
    await host.waitFor(/connected to .* as "proxied-box"/, 30_000);

    const { devices } = await readJson(await owner.get("/api/host/devices"));
    const called = await owner.post("/api/host/calls", { deviceId: devices[0].id, tool: "read_file", input: { path: "notes.txt" } });
    t.equal(called.status, 200);
    t.match((await readJson(called)).result, { content: /through the proxy/ });

    await eventually(async () => (await logged()).includes(`POST ${serverPath("/api/host/result")}`), 10_000, "the result in the proxy's log");
    const log = await logged();
    for (const request of ["POST /api/auth/device/code", "POST /api/auth/device/credential", "POST /api/host/hello", "GET /api/host/stream"]) {
      const [method, route] = request.split(" ");
      t.match(log, `${method} ${serverPath(route!)} HTTP/1.1`, `the proxy carried ${request}`);
    }
    // Results go to /api/host/result/<call id> (the id is checked before the body is read).
    t.match(
      log,
      new RegExp(`POST ${serverPath("/api/host/result/").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}[^ ]+ HTTP/1\\.1`),
      "the proxy carried POST /api/host/result/<call id>",
    );

    // NO_PROXY: the same set-up, but this server is excluded, so the proxy sees nothing of it.
    const code = (await readJson(await owner.post("/api/host/pairing-codes"))).code;
    const before = (await logged()).split("\n").filter((line) => line.includes("/api/host/enroll")).length;
    const direct = startHost(
      executable,
      { ...env, NO_PROXY: "localhost", TETHER_PAIRING_CODE: code, TETHER_CONFIG_DIR: path.join(work, "config-b"), TETHER_DEVICE_NAME: "direct-box" },
      work,
    );
    t.teardown(() => {
      if (direct.child.exitCode === null) direct.child.kill("SIGKILL");
    });
    await direct.waitFor(/connected to .* as "direct-box"/, 30_000);
    t.equal((await logged()).split("\n").filter((line) => line.includes("/api/host/enroll")).length, before, "NO_PROXY went around the proxy");
  });
}
