/**
 * The commands the pages give run as shown on a fresh machine: the pairing card's and the download card's
 * block is taken from the page, HTML and all, and run by a real shell against a real server (the
 * executable is a stand-in script that reports what it was started with). A device that cannot reach its
 * server names the address it tried.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import t from "tap";
import { authorizeDevice } from "../../src/device/authorize.js";
import { HostClient } from "../../src/device/client.js";
import { installCommand, SERVER_PLATFORM, shellWord } from "../../src/web/install-commands.js";
import { freePort } from "../helpers/app.js";
import { uniqueEmail } from "../helpers/client.js";
import { browserClient } from "../pages/support.js";
import { startHostServer } from "./helpers.js";

const run = promisify(execFile);
const download = (platform: string, file = `tether-host-${platform}`) => ({ platform, file, size: 1, sha256: "ab".repeat(32), path: `/downloads/${file}` });

t.test("the block: download under the real name, check the SHA-256, make executable, start with the server's address", async (t) => {
  const linux = installCommand(download("linux-x64"), { baseURL: "https://tether.example.com/", pairingCode: "ABCD-EFGH" });
  t.equal(
    linux.text,
    [
      "curl -fLo tether-host-linux-x64 https://tether.example.com/downloads/tether-host-linux-x64 &&",
      `echo '${"ab".repeat(32)}  tether-host-linux-x64' | sha256sum -c - &&`,
      "chmod +x tether-host-linux-x64 &&",
      "TETHER_SERVER_URL=https://tether.example.com TETHER_PAIRING_CODE=ABCD-EFGH ./tether-host-linux-x64",
    ].join("\n"),
  );
  t.match(installCommand(download("darwin-arm64"), { baseURL: "http://localhost:3000" }), { label: "macOS (Apple silicon)", text: /shasum -a 256 -c -/ });
  t.notMatch(installCommand(download("darwin-arm64"), { baseURL: "http://localhost:3000" }).text, /PAIRING_CODE/, "no code: device authorization");
  const windows = installCommand(download("win-x64", "tether-host-win-x64.exe"), { baseURL: "http://localhost:3000", pairingCode: "X" });
  t.equal(windows.shell, "powershell");
  t.match(windows.text, "Invoke-WebRequest -UseBasicParsing -OutFile 'tether-host-win-x64.exe' 'http://localhost:3000/downloads/tether-host-win-x64.exe'");
  t.match(windows.text, "$env:TETHER_SERVER_URL = 'http://localhost:3000'; $env:TETHER_PAIRING_CODE = 'X'; .\\tether-host-win-x64.exe");
  t.equal(shellWord("it's"), `'it'\\''s'`, "anything unusual is quoted for the shell");
});

/** The text of the command block `id` on a page, as a browser would copy it. */
function commandOn(html: string, id: string): string {
  const raw = new RegExp(`<textarea id="${id}"[^>]*>([\\s\\S]*?)</textarea>`).exec(html)?.[1];
  if (raw === undefined) throw new Error(`no command block #${id} on the page`);
  return raw
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

t.test(
  "the pairing card's and the download card's commands run as shown, and a tampered file never starts",
  { skip: SERVER_PLATFORM.startsWith("win-") && "POSIX shell commands" },
  async (t) => {
    const downloads = await mkdtemp(path.join(tmpdir(), "tether-downloads-"));
    const machine = await mkdtemp(path.join(tmpdir(), "tether-fresh-machine-"));
    t.teardown(() => Promise.all([rm(downloads, { recursive: true, force: true }), rm(machine, { recursive: true, force: true })]));
    const file = `tether-host-${SERVER_PLATFORM}`;
    const standIn = `#!/bin/sh\necho "started with $TETHER_SERVER_URL ${"$"}{TETHER_PAIRING_CODE:-no code}" > started.txt\n`;
    await writeFile(path.join(downloads, file), standIn);

    const server = await startHostServer(t, { env: { DOWNLOADS_DIR: downloads } });
    const owner = browserClient(server.url);
    await owner.signUp(uniqueEmail("commands"));

    const paired = await (await owner.request("POST", "/devices/pair", { form: {} })).text();
    const code = /class="pair-code"><span class="visually-hidden">Pairing code: <\/span>([A-Z0-9-]+)</.exec(paired)?.[1];
    t.ok(code);
    const pairCommand = commandOn(paired, `pair-command-${SERVER_PLATFORM}`);
    t.match(pairCommand, `curl -fLo ${file} ${server.url}/downloads/${file}`);
    await run("sh", ["-c", pairCommand], { cwd: machine });
    t.equal(await readFile(path.join(machine, "started.txt"), "utf8"), `started with ${server.url} ${code}\n`, "downloaded, checked, made executable, started");

    const page = await (await owner.get("/devices")).text();
    const plain = commandOn(page, `install-command-${SERVER_PLATFORM}`);
    await rm(path.join(machine, "started.txt"));
    await run("sh", ["-c", plain], { cwd: machine });
    t.equal(
      await readFile(path.join(machine, "started.txt"), "utf8"),
      `started with ${server.url} no code\n`,
      "the download card's block starts it for device authorization",
    );

    // The file changes after the page was rendered (or in transit): the check stops the block.
    await writeFile(path.join(downloads, file), `${standIn}echo tampered\n`);
    await rm(path.join(machine, "started.txt"));
    const tampered = await run("sh", ["-c", plain], { cwd: machine }).then(
      () => undefined,
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    t.ok(tampered, "the block fails");
    t.match(`${tampered?.stdout}${tampered?.stderr}`, /FAILED/);
    await t.rejects(readFile(path.join(machine, "started.txt")), "and never starts the file");
  },
);

t.test("the pairing card says plainly when there is nothing to download", async (t) => {
  const empty = await mkdtemp(path.join(tmpdir(), "tether-downloads-"));
  t.teardown(() => rm(empty, { recursive: true, force: true }));
  const server = await startHostServer(t, { env: { DOWNLOADS_DIR: empty } });
  const owner = browserClient(server.url);
  await owner.signUp(uniqueEmail("commands"));
  const paired = await (await owner.request("POST", "/devices/pair", { form: {} })).text();
  t.match(paired, /This server offers no tether-host executable yet/);
  t.notMatch(paired, /<textarea id="pair-command/, "no command that could not run");
});

t.test("a device that cannot reach its server names the address it tried, and asks for no new pairing code", async (t) => {
  const server = `http://127.0.0.1:${await freePort()}`;
  const lines: string[] = [];
  const outcome = await authorizeDevice({
    client: new HostClient(server),
    server,
    configDir: await mkdtemp(path.join(tmpdir(), "tether-config-")),
    name: "laptop",
    platform: "linux-x64",
    log: (line) => lines.push(line),
    stop: new AbortController().signal,
    sleep: async () => true,
  });
  t.equal(outcome, "failed");
  t.match(lines.join("\n"), `cannot reach the server at ${server}`);
  t.match(lines.join("\n"), /TETHER_SERVER_URL/);
  t.notMatch(lines.join("\n"), /pairing code/i);
});
