import { DeviceCallError } from "./device-call-error.js";

/** The bounds of a call's wait, as both dispatchers take them in their options. */
export interface WaitBounds {
  defaultTimeoutMs?: number;
  maxTimeoutMs?: number;
}

/** The wait a call gets: what its caller asked (else the default), at least 1 ms and at most the upper bound. */
export function callTimeoutMs(requested: number | undefined, bounds: WaitBounds): number {
  return Math.min(Math.max(1, requested ?? bounds.defaultTimeoutMs ?? 30_000), bounds.maxTimeoutMs ?? 10 * 60_000);
}

/**
 * A call awaiting its result, on either dispatcher, and the two ways it ends without one: its deadline
 * passes (`DEVICE_TIMEOUT`) or its caller's signal aborts (`CALL_ABORTED`). What giving up means
 * (forget the call, tell the device to cancel) is the subclass's `giveUp`.
 *
 * A class, not a set of closures: one is made per call, and its timer and its abort listener (the
 * object itself, through `handleEvent`) need no function of their own.
 */
export abstract class AwaitedCall {
  resolve!: (value: unknown) => void;
  reject!: (error: DeviceCallError) => void;
  readonly result: Promise<unknown>;
  private readonly timer: NodeJS.Timeout;

  /**
   * `timeoutMs` is the wait the device was given (the timeout's message names it); `deadlineMs` is
   * when this side stops waiting, later than that where another replica times the call out itself.
   */
  constructor(
    readonly timeoutMs: number,
    deadlineMs: number,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.result = new Promise<unknown>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.timer = setTimeout(expire, deadlineMs, this);
    signal?.addEventListener("abort", this, { once: true });
  }

  /** Ends the call without a result; called at most once per cause, and must tolerate a call already settled. */
  protected abstract giveUp(error: DeviceCallError): void;

  /** The caller's signal aborted. */
  handleEvent(): void {
    this.giveUp(new DeviceCallError("CALL_ABORTED", "The caller stopped waiting"));
  }

  expire(): void {
    this.giveUp(new DeviceCallError("DEVICE_TIMEOUT", `The device did not answer within ${this.timeoutMs} ms`));
  }

  /** Stops the deadline and the abort listener: the call is over. */
  cleanup(): void {
    clearTimeout(this.timer);
    this.signal?.removeEventListener("abort", this);
  }
}

function expire(call: AwaitedCall): void {
  call.expire();
}
