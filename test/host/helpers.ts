import path from "node:path";
import type { Test } from "tap";
import type { DatabaseHandle } from "../../src/db/connect.js";
import { runHost, type RunHostOptions } from "../../src/device/host.js";
import { readEventStream, type SseMessage } from "../../src/device/sse.js";
import { PROTOCOL_HEADER, PROTOCOL_VERSION, type AnnouncedTool, type ResultBody } from "../../src/protocol/index.js";
import { builtinTools } from "../../src/tools/index.js";
import { freePort, startTestApp, type TestApp } from "../helpers/app.js";
import { readJson, TestClient, uniqueEmail } from "../helpers/client.js";

/**
 * Like `startTestApp`, with a port and database the caller may choose, so a test can stop the server
 * and start a new one on the same address and data (a restart, as a device sees it).
 */
export async function startHostServer(
  t: Test,
  options: { port?: number; database?: DatabaseHandle; env?: Record<string, string> } = {},
): Promise<TestApp & { port: number }> {
  const port = options.port ?? (await freePort());
  return { ...(await startTestApp(t, { ...options, port })), port };
}

/** A signed-up, signed-in owner. */
export async function signedIn(url: string): Promise<TestClient & { userId: string }> {
  const client = new TestClient(url) as TestClient & { userId: string };
  client.userId = await client.signUp(uniqueEmail("host"));
  return client;
}

/**
 * The real device runtime (runHost with the built-in tools) in this process, serving `root` and paired with
 * `pairingCode` (its credential in `root`/cfg unless `configDir` says). `stop()` ends it and gives its exit
 * code; teardown stops it too, so no device outlives its test.
 */
export function runDevice(
  t: Test,
  options: Omit<RunHostOptions, "tools" | "roots" | "signal" | "handleSignals"> & { server: string; root: string; pairingCode: string; name: string },
): { stop(): Promise<number> } {
  const { root, ...rest } = options;
  const controller = new AbortController();
  const running = runHost({
    tools: builtinTools,
    roots: [root],
    configDir: path.join(root, "cfg"),
    log: () => {},
    ...rest,
    handleSignals: false,
    signal: controller.signal,
  });
  const stop = () => {
    controller.abort();
    return running;
  };
  t.teardown(stop);
  return { stop };
}

export const protocolHeaders = { [PROTOCOL_HEADER]: String(PROTOCOL_VERSION) };

/** Mints a pairing code as `owner` and enrolls with it: a new device's id and token. */
export async function pair(owner: TestClient, name = "test-device"): Promise<{ deviceId: string; token: string }> {
  const minted = await owner.post("/api/host/pairing-codes");
  if (minted.status !== 201) throw new Error(`pairing code: ${minted.status} ${await minted.text()}`);
  const { code } = await readJson(minted);
  return enroll(owner.baseURL, code, name);
}

export async function enroll(url: string, code: string, name = "test-device"): Promise<{ deviceId: string; token: string }> {
  const response = await fetch(`${url}/api/host/enroll`, {
    method: "POST",
    headers: { "content-type": "application/json", ...protocolHeaders },
    body: JSON.stringify({ code, name, platform: "test" }),
  });
  if (response.status !== 201) throw new Error(`enroll: ${response.status} ${await response.text()}`);
  return readJson(response);
}

export const statTool: AnnouncedTool = {
  name: "stat",
  description: "Size, type, timestamps",
  inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  class: "read",
};
export const writeTool: AnnouncedTool = {
  name: "write_file",
  description: "Create or overwrite a file",
  inputSchema: { type: "object", properties: { path: { type: "string" }, content: { type: "string" } }, required: ["path", "content"] },
  class: "mutate",
};
export const openTool: AnnouncedTool = {
  name: "open_path",
  description: "Open with the default application",
  inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  class: "action",
};

interface CallMessage {
  id: string;
  tool: string;
  input: any;
  mode: string;
  timeoutMs: number;
}

/**
 * A device speaking the wire protocol by hand, so tests can make it misbehave (answer late, twice,
 * for another device, or hang up mid-call). The real runtime is tested in the end-to-end test.
 */
export class ScriptedDevice {
  readonly events: SseMessage[] = [];
  private waiters: Array<() => void> = [];
  private abort = new AbortController();
  ended = false;

  constructor(
    readonly url: string,
    readonly deviceId: string,
    readonly token: string,
  ) {}

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.token}`, ...protocolHeaders, ...extra };
  }

  hello(tools: AnnouncedTool[] = [statTool, writeTool, openTool], roots = ["/tmp/root"]): Promise<Response> {
    return fetch(`${this.url}/api/host/hello`, {
      method: "POST",
      headers: this.headers({ "content-type": "application/json" }),
      body: JSON.stringify({ tools, roots, agent: "scripted/1" }),
    });
  }

  /** Opens the stream and waits for `ready`. */
  async connect(): Promise<void> {
    const response = await fetch(`${this.url}/api/host/stream`, { headers: this.headers(), signal: this.abort.signal });
    if (response.status !== 200) throw new Error(`stream: ${response.status} ${await response.text()}`);
    void (async () => {
      try {
        for await (const message of readEventStream(response.body!)) {
          this.events.push(message);
          for (const wake of this.waiters.splice(0)) wake();
        }
      } catch {
        /* aborted */
      }
      this.ended = true;
      for (const wake of this.waiters.splice(0)) wake();
    })();
    await this.next("ready");
  }

  /** The next event named `event` not yet taken (waits for it). */
  async next(event: string, timeoutMs = 5_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.events.findIndex((m) => m.event === event);
      if (index !== -1) return JSON.parse(this.events.splice(index, 1)[0]!.data);
      if (this.ended) throw new Error(`stream ended before a "${event}" event`);
      if (Date.now() > deadline) throw new Error(`no "${event}" event within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  nextCall(): Promise<CallMessage> {
    return this.next("call");
  }

  /** Posts one call's outcome as tether-host does: the call id in the path, the outcome in the body. */
  postResult({ id, ...outcome }: ResultBody): Promise<Response> {
    return fetch(`${this.url}/api/host/result/${encodeURIComponent(id)}`, {
      method: "POST",
      headers: this.headers({ "content-type": "application/json" }),
      body: JSON.stringify(outcome),
    });
  }

  /** Answers calls as they come, with `answer` (a result, or an error as `{ error }`). */
  serve(answer: (call: CallMessage) => unknown): void {
    void (async () => {
      while (!this.ended) {
        let call: CallMessage;
        try {
          call = await this.nextCall();
        } catch {
          // A quiet spell (nextCall's wait ran out) is not the end: serve until the stream ends.
          if (this.ended) return;
          continue;
        }
        const value = await answer(call);
        const body: ResultBody =
          value && typeof value === "object" && "error" in value
            ? { id: call.id, ok: false, error: (value as { error: { code: string; message: string } }).error }
            : { id: call.id, ok: true, result: value };
        await this.postResult(body).catch(() => {});
      }
    })();
  }

  disconnect(): void {
    this.abort.abort();
  }
}

/**
 * A signed-in owner with a paired device (named `name`) that has said hello and holds its stream open
 * (closed at the end of `t`): the one set-up for tests about a connected device.
 */
export async function connectedDevice(
  t: Test,
  url: string,
  name = "test-device",
): Promise<{ owner: TestClient & { userId: string }; deviceId: string; device: ScriptedDevice }> {
  const owner = await signedIn(url);
  const { deviceId, token } = await pair(owner, name);
  const device = new ScriptedDevice(url, deviceId, token);
  const hello = await device.hello();
  if (hello.status !== 200) throw new Error(`hello: ${hello.status} ${await hello.text()}`);
  await device.connect();
  t.teardown(() => device.disconnect());
  return { owner, deviceId, device };
}

/**
 * `text` is `content` inside exactly one untrusted-data fence, opened and closed with one fresh nonce
 * that appears nowhere else: a fake closing marker inside the content stays inside.
 */
export function assertFencedOnce(t: Test, text: string, source: string, content: string): void {
  const opening = /^<untrusted-data nonce="([0-9a-f]{32})" source="([^"]*)">\n/.exec(text);
  t.ok(opening, "the text opens with the fence");
  t.equal(opening?.[2], source, "the fence names its source");
  t.equal(text.match(/<untrusted-data nonce=/g)?.length, 1, "exactly one fence: not fenced twice");
  const nonce = opening?.[1] ?? "missing";
  const closing = `\n</untrusted-data nonce="${nonce}">`;
  t.ok(text.endsWith(closing), "the fence closes at the very end, with its nonce");
  t.equal(text.split(nonce).length - 1, 2, "the nonce appears only in the two real markers");
  t.ok(text.slice(0, -closing.length).endsWith(content), "the content, unchanged, sits inside the fence");
}

/**
 * What a model reads of `text`: outside every well-formed untrusted-data fence (each replaced by `[fenced]`), and
 * each fence's content. A fence ends only at the closing tag with its own nonce, as a model is told to read it.
 */
export function splitFences(text: string): { outside: string; inside: string[] } {
  const inside: string[] = [];
  const outside = text.replace(
    /<untrusted-data nonce="([0-9a-f]{32})" source="[^"]*">\n[^\n]*\n([^]*?)\n<\/untrusted-data nonce="\1">/g,
    (_match, _nonce, content: string) => {
      inside.push(content);
      return "[fenced]";
    },
  );
  return { outside, inside };
}
