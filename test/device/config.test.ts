/**
 * The device's configuration: one JSON file in the platform's config directory, environment variables over
 * it, `tether-host config` showing each value and where it came from, and a bad value as one clear line
 * with exit code 2, whatever the command.
 */
import { mkdtemp, rm, writeFile, mkdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { runCli } from "../../src/device/cli.js";
import { configDirectory, networkEnvironment, resolveHostConfig } from "../../src/device/config.js";
import { builtinTools } from "../../src/tools/index.js";

async function configDir(t: { teardown(fn: () => unknown): void }, config?: unknown): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-config-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  if (config !== undefined) await writeFile(path.join(dir, "config.json"), typeof config === "string" ? config : JSON.stringify(config, null, 2));
  return dir;
}

/** Runs the command in this process with `env` only (no variable of the test's own leaks in). */
async function cli(args: string[], env: Record<string, string>) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const code = await runCli(args, builtinTools, { stdout: (text) => stdout.push(text), stderr: (text) => stderr.push(text) }, env);
  return { code, stdout: stdout.join(""), stderr: stderr.join("") };
}

t.test("the config directory is the platform's, tether-host in it", async (t) => {
  t.equal(configDirectory({}, "linux", "/home/me"), "/home/me/.config/tether-host");
  t.equal(configDirectory({ XDG_CONFIG_HOME: "/xdg" }, "linux", "/home/me"), "/xdg/tether-host");
  t.equal(configDirectory({ TETHER_CONFIG_DIR: "/etc/th" }, "linux", "/home/me"), "/etc/th");
  t.equal(configDirectory({}, "darwin", "/Users/me"), "/Users/me/Library/Application Support/tether-host");
  t.equal(configDirectory({ APPDATA: "C:\\Users\\me\\AppData\\Roaming" }, "win32", "C:\\Users\\me"), "C:\\Users\\me\\AppData\\Roaming\\tether-host");
});

t.test("the file sets every value; the environment overrides each; the sources are named", async (t) => {
  const dir = await configDir(t, {
    server: "https://tether.example.com/",
    roots: ["~/projects", "/srv/models", "relative"],
    name: "build-box",
    concurrency: 8,
    proxy: "http://proxy.corp:3128",
    noProxy: "localhost,.corp",
    caFile: "corp.pem",
    update: "auto",
    tools: [{ name: "convert_ifc", description: "Convert an IFC model", command: ["ifctool", "convert", "{from}"], args: { from: { type: "path" } } }],
  });
  const fromFile = resolveHostConfig({ TETHER_CONFIG_DIR: dir }, "/work");
  t.match(fromFile.config, {
    server: "https://tether.example.com",
    roots: [path.join(os.homedir(), "projects"), "/srv/models", path.join(os.homedir(), "relative")],
    name: "build-box",
    concurrency: 8,
    proxy: "http://proxy.corp:3128",
    noProxy: "localhost,.corp",
    caFile: path.join(dir, "corp.pem"),
    update: "auto",
    configFile: path.join(dir, "config.json"),
  });
  t.same(Object.values(fromFile.sources).filter((source) => source === "config file").length, 9, "every key reads from the file");
  t.same(networkEnvironment(fromFile.config, {}), {
    HTTPS_PROXY: "http://proxy.corp:3128",
    HTTP_PROXY: "http://proxy.corp:3128",
    NO_PROXY: "localhost,.corp",
    TETHER_CA_FILE: path.join(dir, "corp.pem"),
  });

  const env = {
    TETHER_CONFIG_DIR: dir,
    TETHER_SERVER_URL: "http://other:3000",
    TETHER_ROOTS: ["a", "/b"].join(path.delimiter),
    TETHER_DEVICE_NAME: "env-name",
    TETHER_CONCURRENCY: "2",
    HTTPS_PROXY: "http://env-proxy:8080",
    NO_PROXY: "internal",
    TETHER_CA_FILE: "/etc/ca.pem",
    TETHER_AUTO_UPDATE: "0",
  };
  const overridden = resolveHostConfig(env, "/work");
  t.match(overridden.config, {
    server: "http://other:3000",
    roots: ["/work/a", "/b"],
    name: "env-name",
    concurrency: 2,
    proxy: "http://env-proxy:8080",
    noProxy: "internal",
    caFile: "/etc/ca.pem",
    update: "notify",
  });
  t.match(overridden.sources, {
    server: "TETHER_SERVER_URL",
    roots: "TETHER_ROOTS",
    name: "TETHER_DEVICE_NAME",
    concurrency: "TETHER_CONCURRENCY",
    proxy: "HTTPS_PROXY",
    noProxy: "NO_PROXY",
    caFile: "TETHER_CA_FILE",
    update: "TETHER_AUTO_UPDATE",
    tools: "config file",
  });
  t.same(networkEnvironment(overridden.config, env).HTTPS_PROXY, "http://env-proxy:8080", "a proxy variable wins over the file's proxy");

  // `tether-host config --json`: the same, for scripts; the text form names each source on its line.
  const shown = await cli(["config", "--json"], env);
  t.equal(shown.code, 0);
  const json = JSON.parse(shown.stdout);
  t.match(json, { configDir: dir, configFile: path.join(dir, "config.json"), credentials: path.join(dir, "credentials.json") });
  t.match(json.settings.server, { value: "http://other:3000", source: "TETHER_SERVER_URL" });
  t.match(json.settings.tools, { value: ["convert_ifc"], source: "config file" });
  const text = await cli(["config"], { TETHER_CONFIG_DIR: dir, TETHER_UPDATE: "off" });
  t.match(text.stdout, /^server\s+https:\/\/tether\.example\.com\s+\(config file\)$/m);
  t.match(text.stdout, /^update\s+off\s+\(TETHER_UPDATE\)$/m);
  t.match(text.stdout, /^proxy\s+http:\/\/proxy\.corp:3128\s+\(config file\)$/m);

  // The declared tool is served beside the built-ins.
  const tools = JSON.parse((await cli(["tools"], { TETHER_CONFIG_DIR: dir })).stdout) as Array<{ name: string; class: string }>;
  t.match(
    tools.find((tool) => tool.name === "convert_ifc"),
    { class: "action" },
  );
  t.equal(tools.length, builtinTools.length + 1);
});

t.test("without a file: the defaults, named as such", async (t) => {
  const dir = await configDir(t);
  const { config, sources } = resolveHostConfig({ TETHER_CONFIG_DIR: dir }, "/work");
  t.match(config, { server: "http://localhost:3000", roots: ["/work"], concurrency: 4, update: "notify", proxy: undefined, tools: [] });
  t.match(sources, { server: "default", roots: /^default/, update: "default" });
  t.match((await cli(["config"], { TETHER_CONFIG_DIR: dir })).stdout, /^config file\s+\S+config\.json\s+\(none: defaults and environment only\)$/m);
});

t.test("a bad value is one line naming it, and exit code 2, for every command", async (t) => {
  const bad: Array<[string, unknown, RegExp]> = [
    ["not JSON", "{ server: nope", /config\.json is not valid JSON/],
    ["not an object", "[1, 2]", /must hold one JSON object/],
    ["a misspelt key", { sever: "https://x" }, /unknown setting "sever" \(known: server, roots/],
    ["a server that is not a URL", { server: "tether.example.com" }, /"server"=tether\.example\.com is not a URL/],
    ["a server with credentials", { server: "https://u:p@x.example" }, /must be a plain base address/],
    ["roots not a list", { roots: "/srv" }, /"roots" must be a non-empty list of folder paths \(got "\/srv"\)/],
    ["concurrency out of range", { concurrency: 100 }, /"concurrency" must be a whole number from 1 to 64 \(got 100\)/],
    ["an unknown update policy", { update: "always" }, /"update" must be one of "auto", "notify", "off" \(got "always"\)/],
    ["a proxy that is not http(s)", { proxy: "socks5://p:1080" }, /"proxy"=socks5:\/\/p:1080 is not an http\(s\) proxy URL/],
    ["a tool without a command", { tools: [{ name: "x", description: "y" }] }, /tools\[0\] \(x\)\.command must be a list/],
    [
      "a tool that defineShellTool refuses",
      { tools: [{ name: "x", description: "y", command: ["prog", "{a}"] }] },
      /tools\[0\]: Shell tool x: \{a\} is used in the command but not declared in args/,
    ],
    ["a tool named like a built-in", { tools: [{ name: "stat", description: "y", command: ["prog"] }] }, /"stat" is already a tool's name/],
  ];
  for (const [name, config, message] of bad) {
    const dir = await configDir(t, config);
    for (const command of [[], ["status"], ["config"], ["call", "stat", '{"path":"."}'], ["tools"], ["update"]]) {
      const run = await cli(command, { TETHER_CONFIG_DIR: dir });
      t.equal(run.code, 2, `${name}: tether-host ${command.join(" ")} exits 2`);
      t.match(run.stderr, message, `${name}: says what is wrong`);
      t.equal(run.stderr.trim().split("\n").length, 1, `${name}: in one line`);
    }
  }
  const dir = await configDir(t);
  for (const [variable, value, message] of [
    ["TETHER_CONCURRENCY", "lots", /TETHER_CONCURRENCY=lots is not a whole number from 1 to 64/],
    ["TETHER_UPDATE", "sometimes", /TETHER_UPDATE=sometimes is not one of auto, notify, off/],
    ["TETHER_AUTO_UPDATE", "maybe", /TETHER_AUTO_UPDATE=maybe is not 1 or 0/],
    ["TETHER_SERVER_URL", "ftp://x", /TETHER_SERVER_URL=ftp:\/\/x is not an http\(s\) URL/],
  ] as const) {
    const run = await cli(["status"], { TETHER_CONFIG_DIR: dir, [variable]: value });
    t.equal(run.code, 2, `${variable}=${value}: exit 2`);
    t.match(run.stderr, message);
  }
  const conflict = await cli(["config"], { TETHER_CONFIG_DIR: dir, TETHER_UPDATE: "off", TETHER_AUTO_UPDATE: "1" });
  t.equal(conflict.code, 2);
  t.match(conflict.stderr, /TETHER_UPDATE=off and TETHER_AUTO_UPDATE=1 disagree/);
  t.equal((await cli(["status", "--verbose"], { TETHER_CONFIG_DIR: dir })).code, 2, "an unknown flag is a usage error");
});

t.test("status, not enrolled and not running: says so, with the version and the runtime", async (t) => {
  const dir = await configDir(t, { server: "https://tether.example.com", roots: ["/srv"] });
  const run = await cli(["status"], { TETHER_CONFIG_DIR: dir });
  t.equal(run.code, 0);
  t.match(
    run.stdout,
    new RegExp(
      `^version\\s+\\S+ \\(node ${process.versions.node.replace(/\./g, "\\.")}, ${process.platform === "win32" ? "win" : process.platform}-${process.arch}\\)$`,
      "m",
    ),
  );
  t.match(run.stdout, /^enrolled\s+no: run tether-host to enroll$/m);
  t.match(run.stdout, /^connected\s+no: tether-host is not running$/m);
  t.match(run.stdout, /^roots\s+\/srv$/m);
  const json = JSON.parse((await cli(["status", "--json"], { TETHER_CONFIG_DIR: dir })).stdout);
  t.match(json, { server: "https://tether.example.com", enrolled: null, running: null, roots: ["/srv"], update: { policy: "notify", pending: null } });

  const version = await cli(["--version"], {});
  const [first, second] = version.stdout.split("\n");
  t.match(first, /^\d+\.\d+\.\d+$/, "the first line is the version alone (scripts read it)");
  t.equal(second, `node ${process.versions.node} (${process.platform === "win32" ? "win" : process.platform}-${process.arch})`, "the second names the runtime");
});

t.test("a credential left readable by others is made private again at start", { skip: process.platform === "win32" && "file modes are POSIX" }, async (t) => {
  const { tightenPermissions } = await import("../../src/device/private-file.js");
  const dir = await configDir(t);
  await mkdir(path.join(dir, "sub"), { mode: 0o755 });
  const { chmod, stat } = await import("node:fs/promises");
  await writeFile(path.join(dir, "sub", "credentials.json"), "{}", { mode: 0o644 });
  await chmod(path.join(dir, "sub"), 0o755);
  const changed = await tightenPermissions(path.join(dir, "sub"), ["credentials.json"]);
  t.equal(changed.length, 2);
  t.equal((await stat(path.join(dir, "sub"))).mode & 0o777, 0o700);
  t.equal((await stat(path.join(dir, "sub", "credentials.json"))).mode & 0o777, 0o600);
  t.same(await tightenPermissions(path.join(dir, "sub"), ["credentials.json"]), [], "then nothing to do");
});
