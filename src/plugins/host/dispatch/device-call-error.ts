/**
 * Why a call did not produce a result. `fromTool` tells a tool's own error (its code, e.g.
 * `OUTSIDE_ROOTS`, as the device reported it) from a failure to get an answer at all.
 */
export class DeviceCallError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly fromTool = false,
  ) {
    super(message);
    this.name = "DeviceCallError";
  }
}

// The failures both dispatchers give, in one wording: a caller cannot tell which backend it ran on.

export const deviceOffline = () => new DeviceCallError("DEVICE_OFFLINE", "The device is not connected");

export const abandonedBeforeSent = () => new DeviceCallError("CALL_ABORTED", "The call was abandoned before it was sent");

export const disconnected = (message: string) => new DeviceCallError("DEVICE_DISCONNECTED", message);

/** The Redis dispatcher's, while Redis is unreachable: a call fails at once rather than waiting for it. */
export const dispatchUnavailable = () =>
  new DeviceCallError("DISPATCH_UNAVAILABLE", "Calls cannot be routed right now (the shared dispatcher is unreachable); try again shortly");
