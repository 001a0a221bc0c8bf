import { boundFailure, type AnnouncedTool, type ResultBody } from "../../../protocol/index.js";
import type { DeviceChannel, DeviceConnection, StreamOwner } from "../dispatcher.js";
import { AwaitedCall } from "./awaited-call.js";
import { DeviceCallError } from "./device-call-error.js";
import { SettledCalls } from "./settled-calls.js";

/** A device's stream held by the in-memory dispatcher, and the calls in flight on it. */
export interface Connection extends DeviceConnection {
  userId: string;
  channel: DeviceChannel;
  tools: ReadonlyMap<string, AnnouncedTool>;
  /** The same tools as announced, handed out by `toolsOf` (read on every call: no copy each time). */
  toolList: readonly AnnouncedTool[];
  pending: Set<Pending>;
  closed: boolean;
}

export function openConnection(device: StreamOwner, tools: readonly AnnouncedTool[], channel: DeviceChannel, detach: () => void): Connection {
  return {
    deviceId: device.id,
    userId: device.userId,
    channel,
    tools: new Map(tools.map((tool) => [tool.name, tool])),
    toolList: Object.freeze([...tools]),
    pending: new Set(),
    closed: false,
    detach,
  };
}

/** A call sent down a stream of this replica, awaiting its device's result. */
export class Pending extends AwaitedCall {
  constructor(
    readonly id: string,
    readonly deviceId: string,
    readonly toolClass: AnnouncedTool["class"],
    readonly connection: Connection,
    /** Ends the call without a result (timed out, abandoned): the dispatcher's, shared by its calls. */
    private readonly onGiveUp: (pending: Pending, error: DeviceCallError) => void,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ) {
    super(timeoutMs, timeoutMs, signal);
  }

  protected giveUp(error: DeviceCallError): void {
    this.onGiveUp(this, error);
  }

  /** Hands the device's result to the caller: its value, or the tool's own error. */
  deliver(result: ResultBody): void {
    if (result.ok) {
      this.resolve(result.result);
      return;
    }
    // A device's code and message are bounded here, once, for every reader: the API, pages, proposals and models.
    const failure = boundFailure(result.error);
    this.reject(new DeviceCallError(failure.code, failure.message, true));
  }
}

/** The calls awaited on this replica, by id, and those recently settled: which device a call id belongs to, and whether it still counts. */
export class CallBook {
  private readonly awaited = new Map<string, Pending>();
  private readonly settled: SettledCalls;

  constructor(settledMemory: number) {
    this.settled = new SettledCalls(settledMemory);
  }

  add(pending: Pending): void {
    this.awaited.set(pending.id, pending);
    pending.connection.pending.add(pending);
  }

  get(callId: string): Pending | undefined {
    return this.awaited.get(callId);
  }

  isAwaited(pending: Pending): boolean {
    return this.awaited.has(pending.id);
  }

  /** The call is over (settled, failed or given up): it is no longer awaited, and a replay of its id is recognised. */
  remember(pending: Pending): void {
    this.awaited.delete(pending.id);
    pending.connection.pending.delete(pending);
    pending.cleanup();
    this.settled.add(pending.id, pending.deviceId);
  }

  /** The verdict on a call id that is not awaited. */
  verdictWithout(callId: string, deviceId: string) {
    return this.settled.verdict(callId, deviceId);
  }
}
