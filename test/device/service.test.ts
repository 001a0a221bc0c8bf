/**
 * The service definitions `tether-host service install` writes, checked as documents by their own tools:
 * the systemd unit by Debian's `systemd-analyze verify`, the launchd plist by a plist parser (Python's
 * plistlib), the Windows task by an XML parser; and install/uninstall repeated against the files. A real
 * `systemd --user` runs the unit in test/e2e/device/service.test.ts.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import t from "tap";
import { runCli } from "../../src/device/cli.js";
import { launchdPlist, systemdUnit, utf16le, windowsTask, type ServiceSpec } from "../../src/device/service-definitions.js";
import { builtinTools } from "../../src/tools/index.js";
import { IN_CI } from "../helpers/database.js";

const run = promisify(execFile);
const PYTHON = "/usr/bin/python3";

const tempDir = async (t: { teardown(fn: () => unknown): void }, name = "tether-service-") => {
  const dir = await mkdtemp(path.join(os.tmpdir(), name));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
};

/** Values a careless definition would break: spaces, quotes, backslashes, %, $, XML's specials. */
const awkward = `a "quoted" b\\c %h $HOME & <tag>`;

function spec(executable: string, home: string): ServiceSpec {
  return {
    command: [executable, "run"],
    env: { TETHER_SERVICE: "systemd", TETHER_CONFIG_DIR: path.join(home, "cfg %i"), TETHER_DEVICE_NAME: awkward, PATH: "/usr/bin:/bin" },
    workingDirectory: home,
  };
}

async function available(program: string, args: string[]): Promise<boolean> {
  return run(program, args).then(
    () => true,
    () => false,
  );
}

/** A tool a test needs: missing under CI is a failure, elsewhere the test is skipped with the reason. */
async function skipUnless(command: string, args: string[], install: string): Promise<string | false> {
  if (await available(command, args)) return false;
  if (IN_CI) throw new Error(`${command} is missing (${install})`);
  return `no ${command} here (${install})`;
}
const noSystemdAnalyze = await skipUnless("systemd-analyze", ["--version"], "apt-get install -y systemd");
const noPython = await skipUnless(PYTHON, ["--version"], "apt-get install -y python3");

t.test("the systemd unit passes systemd-analyze verify, whatever the paths hold", { skip: noSystemdAnalyze }, async (t) => {
  const home = await tempDir(t, "tether home %h $x ");
  const bin = path.join(home, "bin dir");
  await mkdir(bin);
  const executable = path.join(bin, "tether-host");
  await copyFile("/bin/true", executable);
  const runtime = await tempDir(t, "tether-xdg-");
  for (const restartSteps of [false, true]) {
    const unitDir = await tempDir(t, "tether-unit-");
    const unit = path.join(unitDir, "tether-host.service");
    const { writeFile } = await import("node:fs/promises");
    await writeFile(unit, systemdUnit(spec(executable, home), { restartSteps }));
    const verified = await run("systemd-analyze", ["verify", "--user", unit], { env: { ...process.env, XDG_RUNTIME_DIR: runtime } }).then(
      (result) => ({ code: 0, output: result.stdout + result.stderr }),
      (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, output: error.stdout + error.stderr }),
    );
    t.equal(verified.code, 0, `verify exits 0 (RestartSteps ${restartSteps ? "on" : "off"})`);
    if (!restartSteps) t.equal(verified.output.trim(), "", "and says nothing at all: no unknown key, no bad value");
    else t.notMatch(verified.output, /fatal|bad-setting|not executable|not absolute/i, "only keys this systemd predates, if any");
  }
  const text = systemdUnit(spec(executable, home), { restartSteps: false });
  t.match(text, /^Restart=always$/m);
  t.match(text, /^RestartPreventExitStatus=2 3 4$/m, "no restart where it cannot help");
  t.match(text, /^SuccessExitStatus=10$/m, "an update is a success, and the restart runs the new executable");
  t.match(text, /^WantedBy=default\.target$/m);
});

t.test("the launchd plist parses as a property list and says what it should", { skip: noPython }, async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, "com.tether.tether-host.plist");
  const { writeFile } = await import("node:fs/promises");
  await writeFile(
    file,
    launchdPlist(
      { ...spec("/Users/me/bin/tether host", "/Users/me"), env: { ...spec("x", "/Users/me").env, TETHER_SERVICE: "launchd" } },
      "/Users/me/Library/Logs/tether-host",
    ),
  );
  const parsed = JSON.parse((await run(PYTHON, ["-c", "import json, plistlib, sys; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))", file])).stdout);
  t.same(parsed.ProgramArguments, ["/Users/me/bin/tether host", "run"]);
  t.equal(parsed.Label, "com.tether.tether-host");
  t.equal(parsed.EnvironmentVariables.TETHER_DEVICE_NAME, awkward, "values come back exactly");
  t.equal(parsed.EnvironmentVariables.TETHER_SERVICE, "launchd");
  t.equal(parsed.RunAtLoad, true);
  t.same(parsed.KeepAlive, { SuccessfulExit: false }, "kept alive while it exits unsuccessfully");
  t.equal(parsed.ThrottleInterval, 10);
  t.equal(parsed.WorkingDirectory, "/Users/me");
  t.equal(parsed.StandardErrorPath, "/Users/me/Library/Logs/tether-host/tether-host.stderr.log");
});

t.test("the Windows task is UTF-16 Task Scheduler XML that says what it should", { skip: noPython }, async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, "tether-host-task.xml");
  const command = [
    "C:\\Users\\me\\AppData\\Local\\Programs\\tether-host\\tether-host.exe",
    "service",
    "run",
    "--config-dir",
    "C:\\Users\\me\\AppData\\Roaming\\tether host",
  ];
  const bytes = utf16le(windowsTask({ command, env: {}, workingDirectory: "C:\\Users\\me" }, "DESKTOP-1\\me & you"));
  t.same([...bytes.subarray(0, 2)], [0xff, 0xfe], "a UTF-16 (LE) byte order mark, as schtasks /XML wants");
  const { writeFile } = await import("node:fs/promises");
  await writeFile(file, bytes);
  const script = `
import json, sys, xml.etree.ElementTree as ET
ns = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
root = ET.parse(sys.argv[1]).getroot()
get = lambda p: root.find(p, ns).text
print(json.dumps({
  "root": root.tag, "version": root.get("version"),
  "logonUser": get("t:Triggers/t:LogonTrigger/t:UserId"),
  "principal": get("t:Principals/t:Principal/t:LogonType"),
  "runLevel": get("t:Principals/t:Principal/t:RunLevel"),
  "restartInterval": get("t:Settings/t:RestartOnFailure/t:Interval"),
  "restartCount": get("t:Settings/t:RestartOnFailure/t:Count"),
  "timeLimit": get("t:Settings/t:ExecutionTimeLimit"),
  "instances": get("t:Settings/t:MultipleInstancesPolicy"),
  "batteries": get("t:Settings/t:DisallowStartIfOnBatteries"),
  "command": get("t:Actions/t:Exec/t:Command"),
  "arguments": get("t:Actions/t:Exec/t:Arguments"),
}))`;
  const parsed = JSON.parse((await run(PYTHON, ["-c", script, file])).stdout);
  t.same(parsed, {
    root: "{http://schemas.microsoft.com/windows/2004/02/mit/task}Task",
    version: "1.2",
    logonUser: "DESKTOP-1\\me & you",
    principal: "InteractiveToken",
    runLevel: "LeastPrivilege",
    restartInterval: "PT1M",
    restartCount: "999",
    timeLimit: "PT0S",
    instances: "IgnoreNew",
    batteries: "false",
    command: command[0],
    arguments: 'service run --config-dir "C:\\Users\\me\\AppData\\Roaming\\tether host"',
  });
});

t.test("a definition never carries a line break (it would end the setting early)", async (t) => {
  t.throws(() => systemdUnit({ command: ["/bin/x", "run"], env: { A: "one\ntwo" }, workingDirectory: "/" }, { restartSteps: false }), /line break/);
  t.throws(() => launchdPlist({ command: ["/bin/x\n", "run"], env: {}, workingDirectory: "/" }, "/tmp"), /line break/);
});

t.test(
  "install and uninstall, against the files: repeatable, with the current config, never the pairing code",
  { skip: process.platform !== "linux" && "the systemd unit is Linux's" },
  async (t) => {
    const home = await tempDir(t);
    const xdg = path.join(home, "xdg");
    const configDir = path.join(home, "cfg");
    const unit = path.join(xdg, "systemd", "user", "tether-host.service");
    const env = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      XDG_CONFIG_HOME: xdg,
      TETHER_CONFIG_DIR: configDir,
      TETHER_SERVER_URL: "https://tether.example.com",
      TETHER_ROOTS: "projects",
      TETHER_PAIRING_CODE: "ABCDE-FGHJK",
      TETHER_AUTO_UPDATE: "1",
    };
    const cli = async (...args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(args, builtinTools, { stdout: (text) => out.push(text), stderr: (text) => err.push(text) }, env);
      return { code, out: out.join(""), err: err.join("") };
    };

    const notEnrolled = await cli("service", "install");
    t.equal(notEnrolled.code, 1, "a real install needs an enrolled device");
    t.match(notEnrolled.err, /not enrolled with https:\/\/tether\.example\.com yet: run `tether-host` once/);
    await t.rejects(stat(unit), "and writes nothing");

    const first = await cli("service", "install", "--files-only");
    t.equal(first.code, 0);
    t.match(first.out, `wrote: ${unit}`);
    const written = await readFile(unit, "utf8");
    t.match(written, `Environment="TETHER_CONFIG_DIR=${configDir}"`, "the same config directory");
    t.match(written, `Environment="TETHER_SERVER_URL=https://tether.example.com"`, "the overrides in force");
    t.match(written, `Environment="TETHER_ROOTS=${path.resolve("projects")}"`, "roots made absolute: the service starts elsewhere");
    t.match(written, `Environment="TETHER_AUTO_UPDATE=1"`);
    t.match(written, 'Environment="TETHER_SERVICE=systemd"');
    t.notMatch(written, /PAIRING_CODE|ABCDE/, "never the one-time pairing code");
    t.match(written, /^ExecStart="[^"]+" /m);

    const again = await cli("service", "install", "--files-only");
    t.equal(again.code, 0);
    t.match(again.out, `unchanged: ${unit}`, "installing again changes nothing");
    t.equal(await readFile(unit, "utf8"), written);

    const removed = await cli("service", "uninstall", "--files-only");
    t.equal(removed.code, 0);
    t.match(removed.out, `removed: ${unit}`);
    await t.rejects(stat(unit));
    const nothing = await cli("service", "uninstall", "--files-only");
    t.equal(nothing.code, 0, "uninstalling nothing succeeds");
    t.match(nothing.out, /not installed/);

    t.equal((await cli("service", "frobnicate")).code, 2, "an unknown subcommand is a usage error");
    t.equal((await cli("service", "install", "--now")).code, 2);
  },
);
