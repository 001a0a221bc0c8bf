import { StreamEvent, type AnnouncedTool, type CallEvent, type CancelEvent, type CloseEvent, type ReadyEvent, type ResultBody } from "../protocol/index.js";
import { createScope, describeTool, invokeTool, ToolError, type ApprovedPlan, type LocalTool, type Scope } from "../tools/index.js";
import { authorizeDevice } from "./authorize.js";
import { HostClient, ServerError } from "./client.js";
import { describeNetwork, deviceRequest, type DeviceRequest } from "./http.js";
import { hostEnvironment, hostPlatform, normalizeServerUrl, type HostEnvironment } from "./config.js";
import { forgetCredential, loadCredential, saveCredential, type DeviceCredential } from "./credentials.js";
import { ResultOutbox } from "./result-outbox.js";
import { sleep } from "./sleep.js";
import { readEventStream } from "./sse.js";
import { isOlderVersion } from "../protocol/versions.js";
import { HOST_AGENT, HOST_VERSION } from "./version.js";

/** How `runHost` ended; the CLI exits with it. */
export const ExitCode = {
  /** Stopped on request (SIGINT, SIGTERM, or the caller's signal). */
  stopped: 0,
  /** Could not start: bad roots, or a server speaking another protocol version. */
  failed: 1,
  /** Not paired, or the credential was revoked: pair again with a new code. */
  pairAgain: 3,
  /** Another process connected with this device's credential and took over. */
  replaced: 4,
} as const;

export interface RunHostOptions {
  /** The server's base address; default `TETHER_SERVER_URL`, else `http://localhost:3000`. */
  server?: string;
  /** Built-ins plus the consumer's own tools: `[...builtinTools, convertIfc]`. */
  tools: readonly LocalTool[];
  /** Allowed roots; default `TETHER_ROOTS`, else the working directory. */
  roots?: readonly string[];
  /** Where the credential lives; default `TETHER_CONFIG_DIR`, else `$XDG_CONFIG_HOME/tether` or `~/.config/tether`. */
  configDir?: string;
  /** One-time pairing code for the first start; default `TETHER_PAIRING_CODE`. */
  pairingCode?: string;
  /** The name shown on the /devices page; default `TETHER_DEVICE_NAME`, else the host name. */
  name?: string;
  /** Calls run at once (more wait their turn); default `TETHER_CONCURRENCY`, else 4. */
  concurrency?: number;
  /** Stops the host (as SIGINT would). */
  signal?: AbortSignal;
  /** Stop cleanly on SIGINT and SIGTERM (default true). */
  handleSignals?: boolean;
  /** Status lines (default: stderr). */
  log?: (line: string) => void;
  /** Reconnect backoff: first delay and cap (default 500 ms, 30 s). */
  backoff?: { initialMs: number; maxMs: number };
}

const NO_ACTIVITY_FACTOR = 3;

/**
 * The device side of the connector: pairs once (pairing code → credential in the config directory),
 * then keeps one outbound stream to the server: hello (tools and roots), the event stream, each call
 * run through the tools library and its result posted back. Reconnects with capped, jittered backoff
 * after a network loss or a server restart. Resolves to an `ExitCode`.
 */
export async function runHost(options: RunHostOptions): Promise<number> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  let env: HostEnvironment;
  let server: string;
  try {
    env = hostEnvironment();
    server = normalizeServerUrl(options.server ?? env.server);
  } catch (error) {
    log(`tether-host: ${error instanceof Error ? error.message : String(error)}`);
    return ExitCode.failed;
  }
  const configDir = options.configDir ?? env.configDir;
  const name = options.name ?? env.name;
  const concurrency = Math.max(1, options.concurrency ?? env.concurrency);
  const backoff = options.backoff ?? { initialMs: 500, maxMs: 30_000 };

  const stop = new AbortController();
  if (options.signal) {
    if (options.signal.aborted) stop.abort();
    options.signal.addEventListener("abort", () => stop.abort(), { once: true });
  }
  const onSignal = (signal: NodeJS.Signals) => {
    log(`tether-host: ${signal}, stopping`);
    stop.abort();
  };
  if (options.handleSignals !== false) {
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  }

  try {
    let scope: Scope;
    try {
      scope = await createScope(options.roots ?? env.roots);
    } catch (error) {
      log(`tether-host: ${error instanceof Error ? error.message : String(error)}`);
      return ExitCode.failed;
    }
    let requestThroughNetwork: DeviceRequest;
    try {
      requestThroughNetwork = deviceRequest();
    } catch (error) {
      log(`tether-host: ${error instanceof Error ? error.message : String(error)}`);
      return ExitCode.failed;
    }
    const network = describeNetwork();
    if (network) log(`tether-host: ${network}`);
    const client = new HostClient(server, undefined, requestThroughNetwork);
    const credential = await obtainCredential({ client, server, configDir, name, pairingCode: options.pairingCode ?? env.pairingCode, log, stop: stop.signal, backoff });
    if (typeof credential === "number") return credential;
    client.setToken(credential.token);
    const session = new HostSession({ client, server, configDir, credential, tools: options.tools, scope, concurrency, log, stop: stop.signal, backoff });
    return await session.run();
  } finally {
    if (options.handleSignals !== false) {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  }
}

/** A tool as the server and the model see it: its description names the roots. */
function announce(tool: LocalTool, scope: Scope): AnnouncedTool {
  const described = describeTool(tool, scope);
  return { ...described, inputSchema: described.inputSchema as Record<string, unknown> };
}

interface Backoff {
  initialMs: number;
  maxMs: number;
}

/** Delay before attempt `n` (0-based): exponential, capped, with "equal jitter" (half fixed, half random). */
export function backoffDelay(attempt: number, backoff: Backoff, random = Math.random): number {
  const ceiling = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const describeError = (error: unknown) =>
  error instanceof ServerError ? `${error.code}: ${error.message}` : error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);

async function obtainCredential(args: {
  client: HostClient;
  server: string;
  configDir: string;
  name: string;
  pairingCode: string | undefined;
  log: (line: string) => void;
  stop: AbortSignal;
  backoff: Backoff;
}): Promise<DeviceCredential | number> {
  const { client, server, configDir, log } = args;
  const stored = await loadCredential(configDir, server);
  if (stored) {
    if (args.pairingCode) log(`tether-host: already paired with ${server} as device ${stored.deviceId}; ignoring TETHER_PAIRING_CODE`);
    return stored;
  }
  if (!args.pairingCode) {
    // No code given: the device authorization flow (the owner approves on the server's /device page).
    const authorized = await authorizeDevice({ client, server, configDir, name: args.name, platform: hostPlatform(), log, stop: args.stop, sleep });
    if (typeof authorized !== "string") return authorized;
    return authorized === "stopped" ? ExitCode.stopped : authorized === "failed" ? ExitCode.failed : ExitCode.pairAgain;
  }
  for (let attempt = 0; ; attempt++) {
    try {
      const enrolled = await client.enroll(args.pairingCode, args.name, hostPlatform(), args.stop);
      const credential: DeviceCredential = { deviceId: enrolled.deviceId, token: enrolled.token, name: args.name, pairedAt: new Date().toISOString() };
      await saveCredential(configDir, server, credential);
      log(`tether-host: paired with ${server} as "${args.name}" (device ${enrolled.deviceId})`);
      return credential;
    } catch (error) {
      if (args.stop.aborted) return ExitCode.stopped;
      if (error instanceof ServerError && error.permanent) {
        log(`tether-host: pairing failed: ${error.message} (${error.code})`);
        return error.code === "PROTOCOL_VERSION_UNSUPPORTED" ? ExitCode.failed : ExitCode.pairAgain;
      }
      const delay = backoffDelay(attempt, args.backoff);
      log(`tether-host: cannot reach ${server} to pair (${describeError(error)}); retrying in ${seconds(delay)}`);
      if (!(await sleep(delay, args.stop))) return ExitCode.stopped;
    }
  }
}

interface SessionArgs {
  client: HostClient;
  server: string;
  configDir: string;
  credential: DeviceCredential;
  tools: readonly LocalTool[];
  scope: Scope;
  concurrency: number;
  log: (line: string) => void;
  stop: AbortSignal;
  backoff: Backoff;
}

/** Why one connection ended, and what to do next. */
type Ending = { next: "reconnect"; why: string } | { next: "exit"; code: number };

class HostSession {
  private readonly calls = new Map<string, AbortController>();
  private running = 0;
  private updateNoticed = false;
  private readonly queue: Array<() => void> = [];
  private readonly outbox: ResultOutbox;

  constructor(private readonly args: SessionArgs) {
    this.outbox = new ResultOutbox(args.client, args.stop);
  }

  async run(): Promise<number> {
    const { log, stop, server } = this.args;
    let attempt = 0;
    for (;;) {
      const started = Date.now();
      const ending = await this.connectOnce(() => (attempt = 0));
      if (ending.next === "exit") {
        this.abortAll();
        if (ending.code === ExitCode.stopped) log("tether-host: disconnected, stopped");
        return ending.code;
      }
      if (stop.aborted) {
        this.abortAll();
        log("tether-host: disconnected, stopped");
        return ExitCode.stopped;
      }
      // A connection that lasted a while starts the backoff over.
      if (Date.now() - started > 60_000) attempt = 0;
      const delay = backoffDelay(attempt++, this.args.backoff);
      log(`tether-host: disconnected from ${server} (${ending.why}); reconnecting in ${seconds(delay)}`);
      if (!(await sleep(delay, stop))) {
        this.abortAll();
        log("tether-host: stopped");
        return ExitCode.stopped;
      }
    }
  }

  /** Hello, then the stream until it ends. `onReady` resets the caller's backoff. */
  private async connectOnce(onReady: () => void): Promise<Ending> {
    const { client, scope, tools, stop, log, server, credential } = this.args;
    const connection = new AbortController();
    const abortConnection = () => connection.abort();
    stop.addEventListener("abort", abortConnection, { once: true });
    let watchdog: NodeJS.Timeout | undefined;
    try {
      const hello = await client.hello(
        { tools: tools.map((tool) => announce(tool, scope)), roots: [...scope.roots], agent: HOST_AGENT },
        connection.signal,
      );
      this.noticeUpdate(hello.hostVersion);
      const body = await client.stream(connection.signal);
      let idleLimitMs = 45_000;
      const armWatchdog = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => connection.abort(new Error("no keep-alive from the server")), idleLimitMs);
      };
      armWatchdog();
      for await (const message of readEventStream(body, armWatchdog)) {
        if (message.event === StreamEvent.ready) {
          const ready = JSON.parse(message.data) as ReadyEvent;
          idleLimitMs = Math.max(1_000, ready.keepAliveMs * NO_ACTIVITY_FACTOR);
          armWatchdog();
          onReady();
          log(`tether-host: connected to ${server} as "${credential.name}" (device ${ready.deviceId}); ${tools.length} tools; roots: ${scope.roots.join(", ")}`);
        } else if (message.event === StreamEvent.call) {
          this.schedule(JSON.parse(message.data) as CallEvent);
        } else if (message.event === StreamEvent.cancel) {
          this.calls.get((JSON.parse(message.data) as CancelEvent).id)?.abort();
        } else if (message.event === StreamEvent.close) {
          const close = JSON.parse(message.data) as CloseEvent;
          if (close.reason === "revoked") return await this.revoked(close.message);
          if (close.reason === "replaced") {
            log(`tether-host: ${close.message}. Another tether-host is using this device's credential; this one stops.`);
            return { next: "exit", code: ExitCode.replaced };
          }
          return { next: "reconnect", why: close.message };
        }
      }
      return { next: "reconnect", why: "the stream ended" };
    } catch (error) {
      if (stop.aborted) return { next: "exit", code: ExitCode.stopped };
      if (error instanceof ServerError) {
        if (error.credentialRejected) return await this.revoked(error.message);
        if (error.code === "PROTOCOL_VERSION_UNSUPPORTED") {
          log(`tether-host: ${error.message}`);
          return { next: "exit", code: ExitCode.failed };
        }
      }
      const reason = connection.signal.aborted && connection.signal.reason instanceof Error ? connection.signal.reason.message : describeError(error);
      return { next: "reconnect", why: reason };
    } finally {
      clearTimeout(watchdog);
      stop.removeEventListener("abort", abortConnection);
      connection.abort();
    }
  }

  private async revoked(message: string): Promise<Ending> {
    const { configDir, server, log } = this.args;
    await forgetCredential(configDir, server).catch(() => {});
    log(`tether-host: ${message}. The stored credential was removed; pair again: mint a code on ${server}/devices and start with TETHER_PAIRING_CODE=<code>.`);
    return { next: "exit", code: ExitCode.pairAgain };
  }

  /** Runs the call when a slot is free (at most `concurrency` at once). */
  private schedule(call: CallEvent): void {
    const controller = new AbortController();
    this.calls.set(call.id, controller);
    const start = () => {
      this.running++;
      void this.execute(call, controller).finally(() => {
        this.running--;
        this.calls.delete(call.id);
        this.queue.shift()?.();
      });
    };
    if (this.running < this.args.concurrency) start();
    else this.queue.push(start);
  }

  private async execute(call: CallEvent, controller: AbortController): Promise<void> {
    const { tools, scope } = this.args;
    const timer = setTimeout(() => controller.abort(), call.timeoutMs);
    let body: ResultBody;
    try {
      if (controller.signal.aborted) return;
      const result = await invokeTool(tools, call.tool, call.input, {
        scope,
        mode: call.mode,
        signal: controller.signal,
        ...(isApprovedPlan(call.expectedPlan) ? { expectedPlan: call.expectedPlan } : {}),
      });
      body = { id: call.id, ok: true, result };
    } catch (error) {
      const failure =
        error instanceof ToolError
          ? { code: error.code, message: error.message }
          : { code: "INTERNAL", message: `The tool failed: ${error instanceof Error ? error.message : String(error)}` };
      body = { id: call.id, ok: false, error: failure };
    } finally {
      clearTimeout(timer);
    }
    // The server gave up on a cancelled call: nothing to post.
    if (controller.signal.aborted) return;
    await this.outbox.post(body);
  }

  /** One line, once per run, when the server offers a newer tether-host; it never updates itself. */
  private noticeUpdate(offered: string | undefined): void {
    if (this.updateNoticed || !offered || !isOlderVersion(HOST_VERSION, offered)) return;
    this.updateNoticed = true;
    const file = `tether-host-${hostPlatform()}${process.platform === "win32" ? ".exe" : ""}`;
    this.args.log(`tether-host: an update is available: ${offered} (this is ${HOST_VERSION}). Download ${this.args.server}/downloads/${file} and replace this executable.`);
  }

  private abortAll(): void {
    for (const controller of this.calls.values()) controller.abort();
    this.queue.length = 0;
  }
}

export type { DeviceCredential };

/** The server's approved plan, as it arrives off the wire. */
function isApprovedPlan(value: unknown): value is ApprovedPlan {
  const plan = value as ApprovedPlan | undefined;
  return typeof plan?.diff === "string" && typeof plan.summary === "string";
}
