import { BLOB_UPLOAD_CALL, type AnnouncedTool, type ToolMode } from "../../../protocol/index.js";
import type { CallOptions } from "../dispatcher.js";
import { abandonedBeforeSent, DeviceCallError } from "./device-call-error.js";

/** What the stream holding a device offers a new call: its tools and how many calls are in flight on it. */
export interface StreamCapacity {
  tools: ReadonlyMap<string, AnnouncedTool>;
  inFlight: number;
  maxInFlight: number;
}

/**
 * Whether a call may go down the stream, decided before anything is sent: the tool exists, the mode
 * is one its class has (a mutate tool plans or applies, the others run), the stream is not full and
 * the caller has not already given up. Returns the tool and its mode, or why not.
 */
export function checkCall(stream: StreamCapacity, toolName: string, options: CallOptions): { tool: AnnouncedTool; mode: ToolMode } | DeviceCallError {
  const tool = toolName === BLOB_UPLOAD_CALL && options.internal ? BLOB_UPLOAD_TOOL : stream.tools.get(toolName);
  if (!tool) return new DeviceCallError("UNKNOWN_TOOL", `The device has no tool named "${toolName}"`);
  const mode = options.mode ?? (tool.class === "mutate" ? "plan" : "run");
  const allowed = tool.class === "mutate" ? mode === "plan" || mode === "apply" : mode === "run";
  if (!allowed) {
    const expected = tool.class === "mutate" ? `"plan" or "apply"` : `"run"`;
    return new DeviceCallError("INVALID_MODE", `"${toolName}" is a ${tool.class} tool: its mode is ${expected}, not "${mode}"`);
  }
  if (stream.inFlight >= stream.maxInFlight) {
    return new DeviceCallError("DEVICE_BUSY", `The device already has ${stream.maxInFlight} calls in flight`);
  }
  if (options.signal?.aborted) return abandonedBeforeSent();
  return { tool, mode };
}

/** The server's blob upload request as the dispatcher sees it: a read, sent only by the server itself. */
const BLOB_UPLOAD_TOOL: AnnouncedTool = Object.freeze({
  name: BLOB_UPLOAD_CALL,
  description: "Upload a blob this device described",
  inputSchema: { type: "object" },
  class: "read",
});
