import type { BatchWriter } from "../../db/batch-writer.js";
import { outsideFairShare } from "../../http/fair-share-context.js";
import type { AnnouncedTool } from "../../protocol/index.js";
import type { AuditRow } from "../activity/audit-plugin.js";
import * as audit from "./audit.js";
import type { AuditActor } from "./audit.js";
import type { DeviceGrant } from "./credential-grants.js";
import type { DeviceAccess } from "./device-access.js";
import type { Dispatcher } from "./dispatcher.js";
import { HostError } from "./errors.js";
import { blobsOption, type BlobsFor, type createProposalService } from "./proposal-service.js";
import type { Proposal } from "./proposals.js";

export interface Caller {
  userId: string;
  actor: AuditActor;
  /** The credential behind the call, for the audit log (see audit.ts). */
  credential?: string;
  /** The devices this credential may touch (credential-grants.ts); absent: all the owner's. */
  deviceIds?: DeviceGrant;
}

export interface CallRequest {
  deviceId: string;
  tool: string;
  input: unknown;
  timeoutMs?: number;
  /** Refuse unless the tool is of this class (the chat assistant gets read tools only). */
  requireClass?: AnnouncedTool["class"];
  /** The caller stopped waiting (e.g. its HTTP client went away): the device is told to cancel. */
  signal?: AbortSignal;
}

export type CallOutcome = { kind: "result"; tool: AnnouncedTool; result: unknown } | { kind: "proposal"; tool: AnnouncedTool; proposal: Proposal };

export interface ToolCallsOptions {
  dispatcher: Dispatcher;
  audit: BatchWriter<AuditRow>;
  ownedDevice: DeviceAccess["ownedDevice"];
  proposals: Pick<ReturnType<typeof createProposalService>, "checkRoom" | "store">;
  /** The error code the audit log records for a failure. */
  codeOf: (error: unknown) => string;
  onReadResult: ((caller: Caller, deviceId: string, result: unknown) => Promise<unknown>) | undefined;
  blobsFor: BlobsFor | undefined;
}

/**
 * A tool call on one of the caller's devices: a read or action tool runs and its result comes back; a
 * mutate tool's plan is stored as a proposal. Audited either way, failures included.
 */
export function createToolCalls(options: ToolCallsOptions): (caller: Caller, request: CallRequest) => Promise<CallOutcome> {
  const { dispatcher, audit: auditLog, ownedDevice, proposals: proposalService, codeOf } = options;
  return async (caller, request) => {
    const device = await ownedDevice(caller.userId, request.deviceId, caller.deviceIds);
    const tool = dispatcher.toolsOf(request.deviceId)?.find((t) => t.name === request.tool);
    if (tool && request.requireClass && tool.class !== request.requireClass) {
      throw new HostError("NOT_A_READ_TOOL", `"${tool.name}" is a ${tool.class} tool; only ${request.requireClass} tools are allowed here`);
    }
    const started = performance.now();
    const entry = {
      userId: caller.userId,
      deviceId: request.deviceId,
      actor: caller.actor,
      credential: caller.credential ?? null,
      tool: request.tool,
      input: request.input,
    };
    const mode = tool?.class === "mutate" ? "plan" : "run";
    if (mode === "plan") {
      // No room for another proposal: refused before the device does the work of planning it.
      await proposalService.checkRoom(device).catch((error: unknown) => {
        audit.record(auditLog, { ...entry, event: "propose", mode, outcome: "error", errorCode: codeOf(error), durationMs: performance.now() - started });
        throw error;
      });
    }
    let result: unknown;
    try {
      const blobs = await blobsOption(options.blobsFor, caller.userId, request.input);
      // Waiting for the device holds none of the caller's fair share of this process.
      result = await outsideFairShare(() =>
        dispatcher.call(request.deviceId, request.tool, request.input, {
          mode,
          ...blobs,
          ...(request.timeoutMs !== undefined ? { timeoutMs: request.timeoutMs } : {}),
          ...(request.signal ? { signal: request.signal } : {}),
        }),
      );
    } catch (error) {
      audit.record(auditLog, { ...entry, event: "call", mode, outcome: "error", errorCode: codeOf(error), durationMs: performance.now() - started });
      throw error;
    }
    const durationMs = performance.now() - started;
    // `tool` is known here: an unknown tool fails in the dispatcher.
    if (tool!.class !== "mutate") {
      audit.record(auditLog, { ...entry, event: "call", mode, outcome: "ok", durationMs });
      return { kind: "result", tool: tool!, result: options.onReadResult ? await options.onReadResult(caller, request.deviceId, result) : result };
    }
    const proposal = await proposalService.store(device, { ...entry, mode }, result, durationMs);
    return { kind: "proposal", tool: tool!, proposal };
  };
}
