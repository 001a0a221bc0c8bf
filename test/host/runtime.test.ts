import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Type } from "@sinclair/typebox";
import t from "tap";
import { configDirectory, normalizeServerUrl, parseRoots } from "../../src/device/config.js";
import { loadCredential } from "../../src/device/credentials.js";
import { backoffDelay, ExitCode, runHost } from "../../src/device/host.js";
import { HOST_VERSION } from "../../src/device/version.js";
import { builtinTools, defineLocalTool, defineShellTool } from "../../src/tools/index.js";
import { freePort } from "../helpers/app.js";
import { signedIn, startHostServer } from "./helpers.js";
import { eventually } from "../helpers/eventually.js";
import { readJson } from "../helpers/client.js";

/** The device runtime in this process (the executable's own test is e2e.test.ts). */

const tempDir = async (t: { teardown(fn: () => unknown): void }) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "tether-runtime-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
};

t.test("configuration from the environment", async (t) => {
  t.same(parseRoots(undefined, "/work"), ["/work"], "default: the working directory");
  t.same(parseRoots(["a", "/abs", "", "a"].join(path.delimiter), "/work"), ["/work/a", "/abs"], "relative entries resolve against the cwd");
  t.equal(configDirectory({ TETHER_CONFIG_DIR: "/tmp/x" }), "/tmp/x");
  t.equal(configDirectory({ XDG_CONFIG_HOME: "/cfg" }, "linux"), "/cfg/tether-host");
  t.equal(configDirectory({}, "linux", "/home/me"), "/home/me/.config/tether-host");
  t.equal(normalizeServerUrl("http://example.com:3000/"), "http://example.com:3000");
  t.equal(normalizeServerUrl("https://example.com/tether/"), "https://example.com/tether");
  t.throws(() => normalizeServerUrl("ftp://example.com"), /not an http\(s\) URL/);
  t.throws(() => normalizeServerUrl("http://user:pw@example.com"), /plain base address/);
  t.equal(HOST_VERSION, JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8")).version);
});

t.test("backoff grows, is jittered, and is capped at 30 s", async (t) => {
  const backoff = { initialMs: 500, maxMs: 30_000 };
  // [attempt, what Math.random gives, the delay]: the delay is between half and all of min(initial * 2^attempt, max).
  const cases: [attempt: number, random: number, delayMs: number][] = [
    [0, 0, 250],
    [0, 1, 500],
    [3, 1, 4_000],
    [20, 1, 30_000],
    [1000, 0, 15_000],
  ];
  for (const [attempt, random, delayMs] of cases)
    t.equal(
      backoffDelay(attempt, backoff, () => random),
      delayMs,
      `attempt ${attempt}, random ${random}`,
    );
});

t.test("not paired: it asks for approval on /device (stopped while waiting: exit 0); a bad code: exit 3", async (t) => {
  const dir = await tempDir(t);
  const server = await startHostServer(t);
  const lines: string[] = [];
  const log = (line: string) => lines.push(line);
  const base = { server: server.url, tools: builtinTools, roots: [dir], configDir: path.join(dir, "cfg"), handleSignals: false, log };
  const stop = new AbortController();
  const waiting = runHost({ ...base, signal: stop.signal });
  await eventually(() => lines.some((line) => /^[A-Z0-9]{4}-[A-Z0-9]{4}$/.test(line)), 10_000, "the user code on a line of its own");
  t.match(lines.join("\n"), new RegExp(`open\n  ${server.url}/device\\?user_code=[A-Z0-9]{8}\n`));
  stop.abort();
  t.equal(await waiting, ExitCode.stopped);
  t.equal(await runHost({ ...base, pairingCode: "22222-22222" }), ExitCode.pairAgain);
  t.match(lines.at(-1), /pairing failed: This pairing code is not valid/);
  t.equal(await runHost({ ...base, roots: [path.join(dir, "missing")] }), ExitCode.failed);
  t.match(lines.at(-1), /does not exist/);
});

t.test("an unreachable server is retried until stopped (exit 0)", async (t) => {
  const dir = await tempDir(t);
  const lines: string[] = [];
  const stop = new AbortController();
  const port = await freePort();
  const base = { server: `http://127.0.0.1:${port}`, tools: builtinTools, roots: [dir], pairingCode: "22222-22222", handleSignals: false };
  const running = runHost({
    ...base,
    configDir: path.join(dir, "cfg"),
    log: (line) => lines.push(line),
    backoff: { initialMs: 20, maxMs: 50 },
    signal: stop.signal,
  });
  await eventually(() => lines.filter((line) => /cannot reach .* to pair/.test(line)).length >= 3, 5000, "retries");
  stop.abort();
  t.equal(await running, ExitCode.stopped);
  // A signal aborted before the start stops it at once.
  const controller = new AbortController();
  const second = runHost({ ...base, configDir: path.join(dir, "cfg2"), log: () => {}, signal: controller.signal });
  controller.abort();
  t.equal(await second, ExitCode.stopped);
});

t.test("consumer tools next to the built-ins; calls run concurrently up to the limit; cancelled calls are aborted", async (t) => {
  const dir = await tempDir(t);
  await writeFile(path.join(dir, "model.ifc"), "ISO-10303-21;\n");
  const server = await startHostServer(t);
  const owner = await signedIn(server.url);
  const { code } = await readJson(await owner.post("/api/host/pairing-codes"));

  let running = 0;
  let peak = 0;
  let aborted = 0;
  const slow = defineLocalTool({
    name: "slow_echo",
    description: "Waits, then echoes",
    class: "read",
    input: Type.Object({ ms: Type.Integer({ minimum: 0 }), n: Type.Integer() }, { additionalProperties: false }),
    async run(input, ctx) {
      running++;
      peak = Math.max(peak, running);
      try {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, input.ms);
          ctx.signal?.addEventListener("abort", () => {
            clearTimeout(timer);
            aborted++;
            reject(new Error("aborted"));
          });
        });
      } finally {
        running--;
      }
      return { n: input.n };
    },
  });
  const convertIfc = defineShellTool({
    name: "convert_ifc",
    description: "Convert an IFC model (here: wc -c as the fixed program)",
    command: ["wc", "-c", "{file}"],
    args: { file: { type: "path", mustExist: true } },
  });

  const stop = new AbortController();
  const lines: string[] = [];
  const host = runHost({
    server: server.url,
    tools: [...builtinTools, slow, convertIfc],
    roots: [dir],
    configDir: path.join(dir, "cfg"),
    pairingCode: code,
    concurrency: 2,
    handleSignals: false,
    signal: stop.signal,
    log: (line) => lines.push(line),
  });
  await eventually(() => lines.some((line) => /connected to/.test(line)), 10_000, "connected");
  const credential = await loadCredential(path.join(dir, "cfg"), server.url);
  const deviceId = credential!.deviceId;

  const calls = await Promise.all(
    Array.from({ length: 6 }, (_, n) => owner.post("/api/host/calls", { deviceId, tool: "slow_echo", input: { ms: 50, n } }).then(readJson)),
  );
  t.same(
    calls.map((c) => c.result.n),
    [0, 1, 2, 3, 4, 5],
  );
  t.equal(peak, 2, "never more than 2 at once");

  const converted = await readJson(await owner.post("/api/host/calls", { deviceId, tool: "convert_ifc", input: { file: "model.ifc" } }));
  t.match(converted, { class: "action", result: { exitCode: 0 } });
  t.match(JSON.stringify(converted.result), /14/);

  const timedOut = await owner.post("/api/host/calls", { deviceId, tool: "slow_echo", input: { ms: 60_000, n: 9 }, timeoutMs: 100 });
  t.equal(timedOut.status, 504);
  await eventually(() => aborted === 1, 5000, "the device aborted the cancelled call");

  stop.abort();
  t.equal(await host, ExitCode.stopped);
  t.match(lines.at(-1), /stopped/);
});
