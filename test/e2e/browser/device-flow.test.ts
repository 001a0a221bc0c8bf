/**
 * Enrollment by device authorization with the real executable against the real server: tether-host
 * starts with no credential and no pairing code, prints the URL and the code, and the owner approves
 * in Chromium (playwright-core, Debian's /usr/bin/chromium). Also a denial, a code that expires, and
 * polling too fast (slow_down), each ending as the user would see it.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import type { Test } from "tap";
import t from "tap";
import { HOST_VERSION } from "../../../src/device/version.js";
import { readJson, TestClient, uniqueEmail } from "../../helpers/client.js";
import { IN_CI } from "../../helpers/database.js";
import { textOf } from "../../pages/support.js";
import { approvalPrompt, builtExecutable, startHost, type HostProcess } from "../../host/executable.js";
import { signedIn, startHostServer } from "../../host/helpers.js";

const CHROMIUM = "/usr/bin/chromium";
const PASSWORD = "correct horse battery";

const executable = await builtExecutable(t);

/** A work folder with a project root, and the device started in it with no credential and no code. */
async function startUnpairedDevice(t: Test, serverUrl: string, name: string): Promise<{ host: HostProcess; root: string }> {
  const work = await mkdtemp(path.join(os.tmpdir(), "tether-device-flow-"));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const root = path.join(work, "project");
  await mkdir(root);
  await writeFile(path.join(root, "notes.txt"), "hello\n");
  const host = startHost(
    executable,
    { TETHER_SERVER_URL: serverUrl, TETHER_ROOTS: root, TETHER_CONFIG_DIR: path.join(work, "config"), TETHER_DEVICE_NAME: name },
    work,
  );
  t.teardown(() => {
    if (host.child.exitCode === null) host.child.kill("SIGKILL");
  });
  return { host, root };
}

if (!existsSync(CHROMIUM) && !IN_CI) {
  t.plan(0, `skip: ${CHROMIUM} is missing (apt-get install -y chromium)`);
} else {
  t.test("approve in Chromium: the device connects and runs a call; an older device is told an update exists", async (t) => {
    // This server offers a newer tether-host than the one under test.
    const downloads = await mkdtemp(path.join(os.tmpdir(), "tether-offer-"));
    t.teardown(() => rm(downloads, { recursive: true, force: true }));
    await writeFile(path.join(downloads, "manifest.json"), JSON.stringify({ version: "99.0.0", targets: [] }));
    const app = await startHostServer(t, { env: { DEVICE_POLL_INTERVAL: "1s", DOWNLOADS_DIR: downloads } });
    const email = uniqueEmail("approve");
    const owner = new TestClient(app.url);
    await owner.signUp(email, PASSWORD, "Ada Approver");

    const { host } = await startUnpairedDevice(t, app.url, "flow-box");
    const { url, userCode } = await approvalPrompt(host);
    t.equal(url, `${app.url}/device?user_code=${userCode.replace("-", "")}`, "verification_uri_complete");

    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
    t.teardown(() => browser.close());
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${app.url}/login`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL((address) => !address.pathname.startsWith("/login"));

    await page.goto(url);
    const panel = page.locator("#device-panel");
    await panel.getByText("Is this your device?").waitFor();
    const shown = textOf(await panel.innerHTML());
    t.match(shown, `Code ${userCode}`);
    t.match(shown, "Device name The device calls itself “flow-box”");
    t.match(shown, `Platform ${process.platform}-${process.arch}`);
    t.match(shown, `Version tether-host ${HOST_VERSION}`);
    t.match(shown, /Requested from \S+/);
    await panel.getByRole("button", { name: "Approve" }).click();
    await panel.getByText("Device approved").waitFor();

    await host.waitFor(/approved; paired with .* as "flow-box"/, 30_000);
    await host.waitFor(/connected to .* as "flow-box"/, 30_000);
    const update = await host.waitFor(/an update is available/);
    t.match(update, `99.0.0 (this is ${HOST_VERSION})`);
    t.match(update, `${app.url}/downloads/tether-host-${process.platform}-${process.arch}`);
    t.equal(host.stderr.filter((line) => /an update is available/.test(line)).length, 1, "said once");

    // The owner runs a call on the device just enrolled.
    const { devices } = await readJson(await owner.get("/api/host/devices"));
    t.match(devices, [{ name: "flow-box", online: true, agent: `tether-host/${HOST_VERSION}` }]);
    const called = await owner.post("/api/host/calls", { deviceId: devices[0].id, tool: "stat", input: { path: "notes.txt" } });
    t.equal(called.status, 200);
    t.match((await readJson(called)).result, { type: "file", size: 6 });

    await page.goto(`${app.url}/devices`);
    t.match(textOf(await page.locator("#devices-list").innerHTML()), `tether-host 99.0.0 is available (this device runs tether-host/${HOST_VERSION})`);
  });
}

t.test("polling too fast gets slow_down; a denial ends the device with exit code 3", async (t) => {
  // The device is told to poll every 1 s (the whole seconds of 1.5 s) but the server wants 1.5 s:
  // its second poll comes too soon, and it must slow down by 5 s as RFC 8628 says.
  const app = await startHostServer(t, { env: { DEVICE_POLL_INTERVAL: "1.5s" } });
  const owner = await signedIn(app.url);
  const { host } = await startUnpairedDevice(t, app.url, "denied-box");
  const { userCode } = await approvalPrompt(host);
  await host.waitFor(/asked to poll less often; now every 6 s/, 30_000);

  t.equal((await owner.get(`/device?user_code=${userCode}`)).status, 200);
  const denied = await owner.request("POST", "/device/deny", { form: { user_code: userCode } });
  t.match(textOf(await denied.text()), "Request denied");
  t.equal(await host.exited, 3);
  t.match(host.stderr.join("\n"), /denied on .*Start tether-host again/);
  t.same((await readJson(await owner.get("/api/host/devices"))).devices, []);
});

t.test("a code nobody approves expires: the device says so and exits 3", async (t) => {
  const app = await startHostServer(t, { env: { DEVICE_CODE_EXPIRES_IN: "3s", DEVICE_POLL_INTERVAL: "1s" } });
  const { host } = await startUnpairedDevice(t, app.url, "late-box");
  const { userCode } = await approvalPrompt(host);
  t.equal(await host.exited, 3);
  t.match(host.stderr.join("\n"), `the code ${userCode} expired before it was approved`);
});
