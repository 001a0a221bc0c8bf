/**
 * tether-host as a service, with the real executable against the real server, which offers the next
 * release (test/host/release.ts):
 *
 * - `tether-host service run` (the supervisor the Windows task runs): with automatic updates on, the host
 *   installs the release, exits 10, and is started again as the new version;
 * - a real `systemd --user` (test/helpers/systemd-user.ts), when this machine can run one: `service install`
 *   starts the unit, the host updates itself and systemd restarts it as the new version; install again
 *   changes nothing; `service status` and `service logs` (journald) say so; uninstall, twice. Paths with
 *   spaces, `%` and `$` go through the unit's quoting both ways. Elsewhere, test/device/service.test.ts
 *   checks the files.
 */
import { spawn } from "node:child_process";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { HOST_VERSION } from "../../../src/device/version.js";
import { IN_CI } from "../../helpers/database.js";
import { eventually } from "../../helpers/eventually.js";
import { readJson } from "../../helpers/client.js";
import { startUserSystemd } from "../../helpers/systemd-user.js";
import { startHost } from "../../host/executable.js";
import { signedIn, startHostServer } from "../../host/helpers.js";
import { releases, versionOf } from "../../host/release.js";

const { current, next } = await releases(t);

async function setup(t: Test, name: string) {
  const home = await mkdtemp(path.join(os.tmpdir(), "tether-service-home-"));
  t.teardown(() => rm(home, { recursive: true, force: true }));
  // Awkward on purpose: the unit must quote them, and systemd must hand them back unchanged.
  const bin = path.join(home, "bin 100% $HOME");
  const root = path.join(home, "project %h $x");
  await mkdir(bin);
  await mkdir(root);
  const executable = path.join(bin, "tether-host");
  await copyFile(current, executable);
  const runtime = path.join(home, "run");
  await mkdir(runtime, { mode: 0o700 });
  const app = await startHostServer(t, { env: { DOWNLOADS_DIR: next.dir } });
  const owner = await signedIn(app.url);
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    XDG_RUNTIME_DIR: runtime,
    XDG_CONFIG_HOME: path.join(home, ".config"),
    TETHER_SERVER_URL: app.url,
    TETHER_ROOTS: root,
    TETHER_DEVICE_NAME: name,
  };
  // Enrolled once in a terminal, as the docs say, before the service is installed.
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));
  const enrolling = startHost(executable, { ...env, TETHER_PAIRING_CODE: code }, home);
  t.teardown(() => {
    if (enrolling.child.exitCode === null) enrolling.child.kill("SIGKILL");
  });
  await enrolling.waitFor(/connected to /);
  enrolling.child.kill("SIGTERM");
  t.equal(await enrolling.exited, 0, "enrolled, then stopped");
  const device = async () =>
    (await readJson(await owner.get("/api/host/devices"))).devices[0] as {
      online: boolean;
      agent: string;
      roots: string[];
      lastUpdate: { ok: boolean; from: string; to: string; trigger: string } | null;
    };
  return { home, executable, root, env, app, owner, device };
}

t.test("service run (the Windows task's supervisor): an automatic update restarts the host as the new version", async (t) => {
  const s = await setup(t, "supervised-box");
  const supervisor = spawn(s.executable, ["service", "run"], { env: { ...s.env, TETHER_AUTO_UPDATE: "1" }, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  supervisor.stderr.setEncoding("utf8").on("data", (chunk: string) => (log += chunk));
  const exited = new Promise<number | null>((resolve) => supervisor.on("exit", (code) => resolve(code)));
  t.teardown(() => {
    if (supervisor.exitCode === null) supervisor.kill("SIGKILL");
  });
  const backAsNext = async () => {
    const device = await s.device();
    // Its hello names the version; online once its stream is open.
    return device.agent === `tether-host/${next.version}` && device.online;
  };
  await eventually(backAsNext, 60_000, () => `the device to come back as ${next.version} (log: ${log})`, 250);
  const device = await s.device();
  t.match(device, { online: true, roots: [s.root], lastUpdate: { ok: true, from: HOST_VERSION, to: next.version, trigger: "auto" } });
  t.match(log, `the host exited with 10 (updated); starting it again in 0.0 s`);
  t.equal((await versionOf(s.executable)).version, next.version, "the executable on disk is the new one");
  supervisor.kill("SIGTERM");
  t.equal(await exited, 0, "the supervisor stops with its host");
  await eventually(async () => !(await s.device()).online, 20_000, "the device offline", 250);
});

t.test("a systemd user service: install, update and restart, status, logs, uninstall; each repeatable", async (t) => {
  const s = await setup(t, "systemd-box");
  const systemd = await startUserSystemd(t, s.env);
  if (typeof systemd === "string") {
    t.comment(`no real systemd --user here (${systemd}); test/device/service.test.ts checks the unit as a file`);
    if (IN_CI && process.getuid?.() === 0) throw new Error(systemd);
    return;
  }
  const cli = (...args: string[]) => systemd.run([s.executable, ...args], { ...s.env, TETHER_AUTO_UPDATE: "1" });

  const installed = await cli("service", "install");
  t.equal(installed.code, 0, installed.stderr);
  t.match(installed.stdout, /^wrote: .*\/systemd\/user\/tether-host\.service$/m);
  t.match(installed.stdout, /^started: tether-host\.service/m);

  // The unit's host connects, sees the next release on offer, installs it and exits 10; systemd starts it again.
  await eventually(
    async () => {
      const device = await s.device();
      return device.agent === `tether-host/${next.version}` && device.online;
    },
    90_000,
    `the service to come back as ${next.version}`,
    500,
  );
  const device = await s.device();
  t.match(device, { online: true, lastUpdate: { ok: true, from: HOST_VERSION, to: next.version, trigger: "auto" } });
  t.same(device.roots, [s.root], "a root with %, $ and spaces reached the host exactly through the unit");
  const shown = await systemd.run(["/usr/bin/systemctl", "--user", "show", "tether-host.service", "-p", "NRestarts,ActiveState,Result"], s.env);
  t.match(shown.stdout, /^ActiveState=active$/m);
  t.match(shown.stdout, /^NRestarts=[1-9]/m, "systemd restarted it after the update");

  const again = await cli("service", "install");
  t.equal(again.code, 0);
  t.match(again.stdout, /^unchanged: /m, "installing again changes nothing…");
  t.match(again.stdout, /^already running: tether-host\.service$/m, "…and restarts nothing");

  const status = await cli("service", "status");
  t.equal(status.code, 0, "status: 0 while it runs");
  t.match(status.stdout, /systemd: active \(running\), enabled/);
  t.match(status.stdout, /^connected\s+yes, since \S+ \(pid \d+, systemd service\)$/m);
  t.match(status.stdout, new RegExp(`^version\\s+${next.version.replace(/\./g, "\\.")} \\(node 24\\.`, "m"));

  const logs = await cli("service", "logs", "-n", "500");
  t.equal(logs.code, 0);
  t.match(logs.stdout, `updated ${HOST_VERSION} → ${next.version}`, "journald has the host's lines");
  t.match(logs.stdout, /connected to http/);

  const removed = await cli("service", "uninstall");
  t.equal(removed.code, 0, removed.stderr);
  t.match(removed.stdout, /^removed: /m);
  await eventually(async () => !(await s.device()).online, 30_000, "the device offline once uninstalled", 250);
  const nothing = await cli("service", "uninstall");
  t.equal(nothing.code, 0, "uninstalling again succeeds");
  t.match(nothing.stdout, /^not installed: /m);
  const gone = await cli("service", "status");
  t.equal(gone.code, 4, "status: 4 when not installed");
});
