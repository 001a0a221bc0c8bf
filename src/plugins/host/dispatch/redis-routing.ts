import { randomUUID } from "node:crypto";
import type { ResultBody } from "../../../protocol/index.js";
import type { CallOptions, Expectation, SettleVerdict } from "../dispatcher.js";
import type { InboxMessage } from "../redis-wire.js";
import { AwaitedCall, callTimeoutMs, type WaitBounds } from "./awaited-call.js";
import { abandonedBeforeSent, DeviceCallError, disconnected, dispatchUnavailable } from "./device-call-error.js";
import { holderOfCall, type Replica } from "./redis-replica.js";

type Answer = SettleVerdict | Expectation;

export interface RoutingOptions extends WaitBounds {
  /** Wait for another replica's answer about a result. */
  answerTimeoutMs: number;
}

/** A call made here for a device whose stream another replica holds. */
class RemoteCall extends AwaitedCall {
  constructor(
    readonly rid: string,
    /** The replica holding the stream: the call is lost if it dies. */
    readonly replica: string,
    private readonly router: CallRouter,
    timeoutMs: number,
    deadlineMs: number,
    signal: AbortSignal | undefined,
  ) {
    super(timeoutMs, deadlineMs, signal);
  }

  protected giveUp(error: DeviceCallError): void {
    this.router.giveUp(this, error);
  }
}

/**
 * Calls and results between replicas. A call for a device held elsewhere is published to the
 * holder's inbox, which runs it on its stream and publishes the outcome back; cancellation follows
 * the same way. A result posted here for a call another replica awaits (its id names that replica)
 * is forwarded there, and the verdict comes back.
 */
export class CallRouter {
  /** Calls made here, run elsewhere, by request id. */
  private readonly remote = new Map<string, RemoteCall>();
  /** Calls run here for another replica, by its request id: a cancellation aborts them. */
  private readonly served = new Map<string, AbortController>();
  /** Questions asked of other replicas (settle, expects), awaiting their answer. */
  private readonly questions = new Map<string, (answer: Answer | undefined) => void>();

  constructor(
    private readonly replica: Replica,
    private readonly options: RoutingOptions,
    private readonly isUp: () => boolean,
  ) {}

  /** The replicas that calls made here wait on (liveness watches them). */
  awaitedReplicas(): string[] {
    return [...this.remote.values()].map((call) => call.replica);
  }

  /** Sends a call to the replica holding the device's stream; resolves to the result it publishes back. */
  callOn(holder: string, deviceId: string, tool: string, input: unknown, callOptions: CallOptions): Promise<unknown> {
    const { signal, ...rest } = callOptions;
    if (signal?.aborted) return Promise.reject(abandonedBeforeSent());
    const waitMs = callTimeoutMs(rest.timeoutMs, this.options);
    // The holder times the call out itself; this deadline only covers a holder that never answers at all.
    const call = new RemoteCall(randomUUID(), holder, this, waitMs, waitMs + this.options.answerTimeoutMs, signal);
    this.remote.set(call.rid, call);
    const message: InboxMessage = { k: "call", rid: call.rid, from: this.replica.id, d: deviceId, tool, input, options: { ...rest, timeoutMs: waitMs } };
    this.replica.send(holder, message).then(
      (receivers) => receivers === 0 && this.finish(call.rid, { error: disconnected("The server holding the device's stream is gone") }),
      () => this.finish(call.rid, { error: dispatchUnavailable() }),
    );
    return call.result;
  }

  /** A remote call ends without a result (timed out, abandoned): its holder is told to cancel it. */
  giveUp(call: RemoteCall, error: DeviceCallError): void {
    if (!this.remote.has(call.rid)) return;
    this.finish(call.rid, { error });
    this.replica.send(call.replica, { k: "cancel", rid: call.rid }).catch(this.replica.report);
  }

  private finish(rid: string, outcome: { result: unknown } | { error: DeviceCallError }): void {
    const call = this.remote.get(rid);
    if (!call) return;
    this.remote.delete(rid);
    call.cleanup();
    if ("error" in outcome) call.reject(outcome.error);
    else call.resolve(outcome.result);
  }

  /** Fails the remote calls `which` picks (a dead holder's, or all when Redis is gone or this replica stops). */
  failWhere(which: (call: { replica: string }) => boolean, error: () => DeviceCallError): void {
    for (const [rid, call] of [...this.remote]) if (which(call)) this.finish(rid, { error: error() });
  }

  /** `Dispatcher.expects`, for a call awaited on whichever replica made it. */
  async expects(deviceId: string, callId: string): Promise<Expectation> {
    const holder = holderOfCall(callId);
    const { local, id } = this.replica;
    if (holder === undefined || holder === id) return local.expects(deviceId, callId);
    const answer = await this.ask(holder, (rid) => ({ k: "expects", rid, from: id, d: deviceId, callId }));
    return typeof answer === "object" ? answer : { verdict: "unknown_call" };
  }

  /** `Dispatcher.settle`, for a call awaited on whichever replica made it. */
  async settle(deviceId: string, result: ResultBody): Promise<SettleVerdict> {
    const holder = holderOfCall(result.id);
    const { local, id } = this.replica;
    if (holder === undefined || holder === id) return local.settle(deviceId, result);
    const answer = await this.ask(holder, (rid) => ({ k: "settle", rid, from: id, d: deviceId, result }));
    return typeof answer === "string" ? answer : "unknown_call";
  }

  /** Asks the replica that holds a call about it; undefined when it is gone or does not answer in time. */
  private async ask(replica: string, question: (rid: string) => InboxMessage): Promise<Answer | undefined> {
    if (!this.isUp()) throw dispatchUnavailable();
    const rid = randomUUID();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done(undefined), this.options.answerTimeoutMs);
      const done = (value: Answer | undefined) => {
        clearTimeout(timer);
        this.questions.delete(rid);
        resolve(value);
      };
      this.questions.set(rid, done);
      this.replica.send(replica, question(rid)).then(
        (receivers) => receivers === 0 && done(undefined),
        () => {
          clearTimeout(timer);
          this.questions.delete(rid);
          reject(dispatchUnavailable());
        },
      );
    });
  }

  /** A message to this replica's inbox, from another replica. */
  receive(message: InboxMessage): void {
    const { local } = this.replica;
    switch (message.k) {
      case "call":
        return this.serve(message);
      case "cancel":
        return this.served.get(message.rid)?.abort();
      case "done":
        return this.finish(
          message.rid,
          message.ok ? { result: message.result } : { error: new DeviceCallError(message.code, message.message, message.fromTool) },
        );
      case "settle":
        return void local.settle(message.d, message.result).then((verdict) => this.answer(message.from, message.rid, verdict));
      case "expects":
        return void local.expects(message.d, message.callId).then((expectation) => this.answer(message.from, message.rid, expectation));
      case "answer":
        return this.questions.get(message.rid)?.(message.answer);
    }
  }

  private answer(to: string, rid: string, value: Answer) {
    return this.replica.send(to, { k: "answer", rid, answer: value }).catch(this.replica.report);
  }

  /** Runs another replica's call on a stream held here, and publishes the outcome back to it. */
  private serve(message: Extract<InboxMessage, { k: "call" }>): void {
    const { local, send, report } = this.replica;
    const controller = new AbortController();
    this.served.set(message.rid, controller);
    local
      .call(message.d, message.tool, message.input, { ...message.options, signal: controller.signal })
      .then(
        (result) => send(message.from, { k: "done", rid: message.rid, ok: true, result }),
        (error: unknown) => {
          const failure = error instanceof DeviceCallError ? error : disconnected(String(error));
          return send(message.from, { k: "done", rid: message.rid, ok: false, code: failure.code, message: failure.message, fromTool: failure.fromTool });
        },
      )
      .catch(report)
      .finally(() => this.served.delete(message.rid));
  }
}
