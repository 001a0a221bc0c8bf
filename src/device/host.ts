import {
  BLOB_UPLOAD_CALL,
  boundFailure,
  StreamEvent,
  type AnnouncedTool,
  type CallEvent,
  type CancelEvent,
  type CloseEvent,
  type ReadyEvent,
  type ResultBody,
} from "../protocol/index.js";
import { createScope, describeTool, invokeTool, ToolError, type ApprovedPlan, type LocalTool, type Scope } from "../tools/index.js";
import { callBlobs, uploadBlob } from "./blob-upload.js";
import { HostClient, ServerError } from "./client.js";
import { describeNetwork, deviceRequest, networkDispatcher, type DeviceRequest } from "./http.js";
import { HostConfigError, hostEnvironment, networkEnvironment, normalizeServerUrl, type HostEnvironment } from "./config.js";
import { CREDENTIAL_FILE, forgetCredential, type DeviceCredential } from "./credentials.js";
import { describeError, obtainCredential } from "./enroll.js";
import { ExitCode } from "./exit-code.js";
import { UpdateAgent, type HostUpdates } from "./host-updates.js";
import { tightenPermissions } from "./private-file.js";
import { ResultOutbox } from "./result-outbox.js";
import { backoffDelay, seconds, sleep, type Backoff } from "./sleep.js";
import { readEventStream } from "./sse.js";
import { StateRecorder } from "./state.js";
import { HOST_AGENT, HOST_VERSION } from "./version.js";

export { ExitCode } from "./exit-code.js";
export { backoffDelay } from "./sleep.js";

export interface RunHostOptions {
  /** The server's base address; default `TETHER_SERVER_URL`, else `http://localhost:3000`. */
  server?: string;
  /** Built-ins plus the consumer's own tools: `[...builtinTools, convertIfc]`. */
  tools: readonly LocalTool[];
  /** Allowed roots; default `TETHER_ROOTS`, else the working directory. */
  roots?: readonly string[];
  /** Where the credential lives; default `TETHER_CONFIG_DIR`, else the platform's (`~/.config/tether-host` on Linux). */
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
  /** Newer releases: notices only by default (the `tether-host` command passes its updater and policy). */
  updates?: HostUpdates;
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
    return error instanceof HostConfigError ? ExitCode.config : ExitCode.failed;
  }
  const configDir = options.configDir ?? env.configDir;
  const name = options.name ?? env.name;
  const concurrency = Math.max(1, options.concurrency ?? env.concurrency);
  const backoff = options.backoff ?? { initialMs: 500, maxMs: 30_000 };

  const stop = stopController(options, log);
  try {
    let scope: Scope;
    try {
      scope = await createScope(options.roots ?? env.roots);
    } catch (error) {
      log(`tether-host: ${error instanceof Error ? error.message : String(error)}`);
      return ExitCode.failed;
    }
    let requestThroughNetwork: DeviceRequest;
    const networkEnv = networkEnvironment(env);
    try {
      requestThroughNetwork = deviceRequest(networkDispatcher(networkEnv));
    } catch (error) {
      log(`tether-host: ${error instanceof Error ? error.message : String(error)}`);
      return error instanceof HostConfigError ? ExitCode.config : ExitCode.failed;
    }
    const network = describeNetwork(networkEnv);
    if (network) log(`tether-host: ${network}`);
    for (const line of await tightenPermissions(configDir, [CREDENTIAL_FILE]).catch(() => []))
      log(`tether-host: ${line} (the credential is for this user only)`);
    const client = new HostClient(server, undefined, requestThroughNetwork);
    const credential = await obtainCredential({
      client,
      server,
      configDir,
      name,
      pairingCode: options.pairingCode ?? env.pairingCode,
      log,
      stop: stop.signal,
      backoff,
    });
    if (typeof credential === "number") return credential;
    client.setToken(credential.token);
    const state = stateRecorder(configDir, server, credential.deviceId);
    const updates = options.updates ?? { policy: env.update };
    const session = new HostSession({
      client,
      request: requestThroughNetwork,
      server,
      configDir,
      credential,
      tools: options.tools,
      scope,
      concurrency,
      log,
      stop: stop.signal,
      backoff,
      updates,
      state,
    });
    const code = await session.run();
    state.set({ connected: false, since: new Date().toISOString() });
    await state.flush();
    return code;
  } finally {
    stop.release();
  }
}

/**
 * Aborts when the caller's signal does and, unless the caller handles signals itself, on SIGINT and
 * SIGTERM; `release` removes the signal handlers again.
 */
function stopController(options: RunHostOptions, log: (line: string) => void): { signal: AbortSignal; release: () => void } {
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
  return {
    signal: stop.signal,
    release: () => {
      if (options.handleSignals === false) return;
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}

/** What `tether-host status` reads: this process, the device, and whether it is connected (not yet). */
function stateRecorder(configDir: string, server: string, deviceId: string): StateRecorder {
  return new StateRecorder(configDir, {
    pid: process.pid,
    version: HOST_VERSION,
    node: process.versions.node,
    server,
    deviceId,
    startedAt: new Date().toISOString(),
    connected: false,
    since: new Date().toISOString(),
    ...(process.env.TETHER_SERVICE ? { service: process.env.TETHER_SERVICE } : {}),
  });
}

/** A tool as the server and the model see it: its description names the roots. */
function announce(tool: LocalTool, scope: Scope): AnnouncedTool {
  const described = describeTool(tool, scope);
  return { ...described, inputSchema: described.inputSchema as Record<string, unknown> };
}

interface SessionArgs {
  client: HostClient;
  /** The network path (proxy, CA) for requests other than the client's: blob uploads. */
  request: DeviceRequest;
  server: string;
  configDir: string;
  credential: DeviceCredential;
  tools: readonly LocalTool[];
  scope: Scope;
  concurrency: number;
  log: (line: string) => void;
  stop: AbortSignal;
  backoff: Backoff;
  updates: HostUpdates;
  state: StateRecorder;
}

/** Why one connection ended, and what to do next. */
type Ending = { next: "reconnect"; why: string } | { next: "exit"; code: number };

class HostSession {
  private readonly calls = new Map<string, AbortController>();
  private running = 0;
  private readonly queue: Array<() => void> = [];
  private readonly outbox: ResultOutbox;
  private readonly updates: UpdateAgent;
  /** Set when an update is in place and the service manager should start it. */
  private readonly restart = new AbortController();

  constructor(private readonly args: SessionArgs) {
    this.outbox = new ResultOutbox(args.client, args.stop);
    this.updates = new UpdateAgent({ ...args, onRestartNeeded: () => this.restart.abort() });
  }

  async run(): Promise<number> {
    const { log, stop, server } = this.args;
    let attempt = 0;
    for (;;) {
      const started = Date.now();
      const ending = await this.connectOnce(() => (attempt = 0));
      this.args.state.set({ connected: false, since: new Date().toISOString(), ...(ending.next === "reconnect" ? { lastError: ending.why } : {}) });
      if (this.restart.signal.aborted) {
        this.abortAll();
        return ExitCode.updated;
      }
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
      if (!(await sleep(delay, AbortSignal.any([stop, this.restart.signal])))) {
        this.abortAll();
        if (this.restart.signal.aborted) return ExitCode.updated;
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
    this.restart.signal.addEventListener("abort", abortConnection, { once: true });
    let watchdog: NodeJS.Timeout | undefined;
    try {
      const hello = await client.hello({ tools: tools.map((tool) => announce(tool, scope)), roots: [...scope.roots], agent: HOST_AGENT }, connection.signal);
      this.args.state.set({ offered: hello.hostVersion, minimum: hello.minimumHostVersion });
      this.updates.afterHello(hello);
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
          this.args.state.set({ connected: true, since: new Date().toISOString(), deviceId: ready.deviceId });
          log(
            `tether-host: connected to ${server} as "${credential.name}" (device ${ready.deviceId}); ${tools.length} tools; roots: ${scope.roots.join(", ")}`,
          );
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
      this.restart.signal.removeEventListener("abort", abortConnection);
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
      // The server fetching a blob handle this device made: not a tool, and never callable as one.
      const result =
        call.tool === BLOB_UPLOAD_CALL
          ? await uploadBlob(scope, call.input, this.args.request, controller.signal)
          : await invokeTool(tools, call.tool, call.input, {
              scope,
              mode: call.mode,
              signal: controller.signal,
              ...(isApprovedPlan(call.expectedPlan) ? { expectedPlan: call.expectedPlan } : {}),
              ...(call.blobs ? { blob: callBlobs(call.blobs, this.args.request) } : {}),
            });
      body = { id: call.id, ok: true, result };
    } catch (error) {
      const failure =
        error instanceof ToolError
          ? { code: error.code, message: error.message }
          : { code: "INTERNAL", message: `The tool failed: ${error instanceof Error ? error.message : String(error)}` };
      // The server would cut a longer message anyway; cut here, it is never sent.
      body = { id: call.id, ok: false, error: boundFailure(failure) };
    } finally {
      clearTimeout(timer);
    }
    // The server gave up on a cancelled call: nothing to post.
    if (controller.signal.aborted) return;
    await this.outbox.post(body);
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
