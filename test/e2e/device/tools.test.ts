import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile, mkdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { openTestDatabase } from "../../helpers/database.js";
import { builtExecutable, startHost as startExecutable } from "../../host/executable.js";
import { signedIn, startHostServer } from "../../host/helpers.js";
import { eventually } from "../../helpers/eventually.js";
import { readJson } from "../../helpers/client.js";

/**
 * The real thing: the single executable built from bin/host.ts (reused when newer than its sources),
 * run as a separate process against the real server over loopback.
 */
const executable = await builtExecutable(t);
const startHost = (env: Record<string, string>, cwd: string) => startExecutable(executable, env, cwd);

t.test("the device executable end to end", async (t) => {
  const outer = t;
  const work = await mkdtemp(path.join(os.tmpdir(), "tether-e2e-"));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const root = path.join(work, "project");
  const configDir = path.join(work, "config");
  await mkdir(path.join(root, "src"), { recursive: true });
  await writeFile(path.join(root, "README.md"), "# Project\nTODO: write docs\n");
  await writeFile(path.join(root, "src", "main.ts"), "export const answer = 41;\n// TODO: fix the answer\n");
  await writeFile(path.join(root, "keep.txt"), "unchanged\n");

  const database = await openTestDatabase();
  t.teardown(() => database.close());
  let server = await startHostServer(t, { database });
  const owner = await signedIn(server.url);
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));

  const host = startHost(
    { TETHER_SERVER_URL: server.url, TETHER_PAIRING_CODE: code, TETHER_ROOTS: "project", TETHER_CONFIG_DIR: configDir, TETHER_DEVICE_NAME: "e2e-box" },
    work,
  );
  t.teardown(() => {
    if (host.child.exitCode === null) host.child.kill("SIGKILL");
  });
  await host.waitFor(/paired with .* as "e2e-box"/);
  await host.waitFor(/connected to .* as "e2e-box"/);

  const credentialFile = path.join(configDir, "credentials.json");
  t.equal((await stat(credentialFile)).mode & 0o777, 0o600, "the credential file is private (0600)");
  const stored = JSON.parse(await readFile(credentialFile, "utf8"));
  t.match(stored.servers[server.url], { deviceId: String, token: /^dt_/, name: "e2e-box" });

  const listing = await readJson(await owner.get("/api/host/devices"));
  t.equal(listing.devices.length, 1);
  const device = listing.devices[0];
  t.match(device, { name: "e2e-box", platform: `${process.platform}-${process.arch}`, online: true, roots: [root] });
  t.equal(device.tools.length, 16, "the 16 built-in tools are announced");
  const editFile = device.tools.find((tool: { name: string }) => tool.name === "edit_file");
  t.match(editFile, { class: "mutate", inputSchema: { type: "object" }, description: /Proposes a change/ });
  t.notMatch(editFile.description, /Allowed roots/, "a built-in is stored with the server's own description, not the device's (roots are listed apart)");

  const call = async (tool: string, input: Record<string, unknown>) => {
    const response = await owner.post("/api/host/calls", { deviceId: device.id, tool, input });
    return { status: response.status, body: await readJson(response) };
  };

  await t.test("read, list, grep and stat", async (t) => {
    const read = await call("read_file", { path: "README.md" });
    t.equal(read.status, 200);
    t.match(read.body.result, { content: "# Project\nTODO: write docs\n", truncated: false }, "the API gives the file's text raw: no untrusted-data markers");
    const list = await call("list_directory", { path: "." });
    t.same(list.body.result.entries.map((e: { name: string }) => e.name).sort(), ["README.md", "keep.txt", "src"]);
    const grep = await call("grep", { pattern: "TODO", literal: true });
    t.same(grep.body.result.matches.map((m: { path: string; line: number }) => `${m.path}:${m.line}`).sort(), ["README.md:2", "src/main.ts:2"]);
    const info = await call("stat", { path: "src/main.ts" });
    t.match(info.body.result, { type: "file", size: 50 });
    const outside = await call("stat", { path: "/etc/passwd" });
    t.equal(outside.status, 422);
    t.equal(outside.body.code, "OUTSIDE_ROOTS");
    const unknown = await call("format_disk", {});
    t.equal(unknown.status, 400);
    t.equal(unknown.body.code, "UNKNOWN_TOOL");
  });

  await t.test("propose an edit, see the diff, approve it, see the file changed on disk", async (t) => {
    const proposed = await call("edit_file", { path: "src/main.ts", edits: [{ find: "answer = 41", replace: "answer = 42" }] });
    t.equal(proposed.status, 202);
    t.match(proposed.body.diff, /-export const answer = 41;\n\+export const answer = 42;/);
    t.equal(await readFile(path.join(root, "src", "main.ts"), "utf8"), "export const answer = 41;\n// TODO: fix the answer\n", "planning left the file alone");
    const approved = await owner.post("/api/host/approve", { proposalId: proposed.body.proposalId });
    t.equal(approved.status, 200);
    t.match(await readJson(approved), { status: "applied" });
    t.equal(await readFile(path.join(root, "src", "main.ts"), "utf8"), "export const answer = 42;\n// TODO: fix the answer\n");
  });

  await t.test("reject another proposal: nothing changes", async (t) => {
    const proposed = await call("write_file", { path: "keep.txt", content: "overwritten\n" });
    t.equal(proposed.status, 202);
    t.match(proposed.body.diff, /-unchanged\n\+overwritten/);
    const rejected = await owner.post("/api/host/reject", { proposalId: proposed.body.proposalId });
    t.match(await readJson(rejected), { status: "rejected" });
    t.equal(await readFile(path.join(root, "keep.txt"), "utf8"), "unchanged\n");
  });

  await t.test("a file changed after its proposal: approving applies nothing", async (t) => {
    await writeFile(path.join(root, "draft.txt"), "first draft\n");
    const proposed = await call("write_file", { path: "draft.txt", content: "approved content\n" });
    t.equal(proposed.status, 202);
    await writeFile(path.join(root, "draft.txt"), "edited meanwhile\n");
    const approved = await owner.post("/api/host/approve", { proposalId: proposed.body.proposalId });
    t.equal(approved.status, 422);
    t.match(await readJson(approved), { code: "FILE_CHANGED" });
    t.equal(await readFile(path.join(root, "draft.txt"), "utf8"), "edited meanwhile\n", "the newer content survives");
    await rm(path.join(root, "draft.txt"));
    const after = await readJson(await owner.get(`/api/host/proposals/${proposed.body.proposalId}`));
    t.match(after, { status: "failed" });
  });

  await t.test("the server restarts on the same port and database: the device reconnects", async (t) => {
    const port = server.port;
    await server.close();
    await host.waitFor(/disconnected from .*reconnecting in/);
    server = await startHostServer(outer, { port, database });
    await eventually(async () => (await readJson(await owner.get("/api/host/devices"))).devices[0]?.online === true, 40_000, "the device back online");
    const info = await call("stat", { path: "README.md" });
    t.equal(info.status, 200);
    t.match(info.body.result, { type: "file" });
  });

  await t.test("revoking the device makes the process exit with code 3", async (t) => {
    t.equal((await owner.delete(`/api/host/devices/${device.id}`)).status, 204);
    t.equal(await host.exited, 3);
    t.match(host.stderr.join("\n"), /revoked.*pair again/i);
    await t.rejects(stat(credentialFile), { code: "ENOENT" }, "the dead credential is forgotten");
  });

  await t.test("a second start reuses its credential; SIGTERM stops it with exit 0", async (t) => {
    const { code: second } = await readJson(await owner.post("/api/host/pairing-codes"));
    const env = { TETHER_SERVER_URL: server.url, TETHER_ROOTS: root, TETHER_CONFIG_DIR: configDir, TETHER_DEVICE_NAME: "again" };
    const first = startHost({ ...env, TETHER_PAIRING_CODE: second }, work);
    await first.waitFor(/connected to/);
    first.child.kill("SIGTERM");
    t.equal(await first.exited, 0);
    const restarted = startHost(env, work);
    t.teardown(() => {
      if (restarted.child.exitCode === null) restarted.child.kill("SIGKILL");
    });
    await restarted.waitFor(/connected to .* as "again"/);
    t.notOk(
      restarted.stderr.some((line) => /paired with/.test(line)),
      "no pairing the second time",
    );
    restarted.child.kill("SIGINT");
    t.equal(await restarted.exited, 0);
  });

  await t.test("local mode: one tool, no server", async (t) => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string }>((resolve) => {
        const child = spawn(executable, args, { cwd: work, env: { PATH: process.env.PATH ?? "", TETHER_ROOTS: root }, stdio: ["ignore", "pipe", "ignore"] });
        let stdout = "";
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
        child.on("exit", (code) => resolve({ code, stdout }));
      });
    const ok = await run(["call", "stat", JSON.stringify({ path: "keep.txt" })]);
    t.equal(ok.code, 0);
    t.match(JSON.parse(ok.stdout), { type: "file", size: 10 });
    const plan = await run(["call", "write_file", JSON.stringify({ path: "keep.txt", content: "planned\n" })]);
    t.equal(plan.code, 0);
    t.match(JSON.parse(plan.stdout), { diff: /\+planned/ });
    t.equal(await readFile(path.join(root, "keep.txt"), "utf8"), "unchanged\n", "a mutate tool without a flag only plans");
    const apply = await run(["call", "write_file", JSON.stringify({ path: "keep.txt", content: "applied\n" }), "--apply"]);
    t.equal(apply.code, 0);
    t.equal(await readFile(path.join(root, "keep.txt"), "utf8"), "applied\n");
    // --apply on a find that is missing or ambiguous answers the find's own error, as --plan does.
    for (const [find, code] of [
      ["absent", "FIND_NOT_FOUND"],
      ["p", "FIND_AMBIGUOUS"],
    ] as const) {
      for (const flag of ["--plan", "--apply"]) {
        const edit = await run(["call", "edit_file", JSON.stringify({ path: "keep.txt", edits: [{ find, replace: "x" }] }), flag]);
        t.equal(edit.code, 1);
        t.match(JSON.parse(edit.stdout), { code }, `edit_file ${flag}: ${code}`);
      }
    }
    const refused = await run(["call", "read_file", JSON.stringify({ path: "../../etc/passwd" })]);
    t.equal(refused.code, 1);
    t.match(JSON.parse(refused.stdout), { code: "OUTSIDE_ROOTS", message: String });
    const badJson = await run(["call", "stat", "{nope"]);
    t.equal(badJson.code, 1);
    t.match(JSON.parse(badJson.stdout), { code: "INVALID_INPUT" });
    const help = await run(["--help"]);
    t.equal(help.code, 0);
    t.match(help.stdout, /tether-host call <tool> '<json>' \[--plan \| --apply\]/);
    t.match(help.stdout, /TETHER_PAIRING_CODE/);
    t.equal((await run(["--frobnicate"])).code, 2, "an unknown option is a usage error");
    t.equal((await run(["call"])).code, 2);
    const version = await run(["--version"]);
    const [versionLine, runtimeLine] = version.stdout.split("\n");
    t.equal(versionLine, JSON.parse(await readFile(new URL("../../../package.json", import.meta.url), "utf8")).version, "the first line is the version");
    t.match(runtimeLine, /^node 24\.\d+\.\d+ \(linux-x64\)$|^node 24\./, "the second names the embedded Node: 24, the LTS");
  });
});
