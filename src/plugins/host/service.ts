import type { Kysely } from "kysely";
import type { BatchWriter } from "../../db/batch-writer.js";
import type { Database } from "../../db/schema.js";
import type { AuditRow } from "../audit/audit-plugin.js";
import { assistantTools, type AssistantTool } from "./assistant.js";
import * as audit from "./audit.js";
import type { AuditActor } from "./audit.js";
import type { DeviceCache } from "./device-cache.js";
import * as devices from "./devices.js";
import { MAX_STORED_DIFF_BYTES, MAX_STORED_DIFF_LINES, tooLargeToStore } from "./diff-limits.js";
import type { DeviceIdentity, DeviceSummary, TokenVerdict } from "./devices.js";
import { DeviceCallError, type DeviceChannel, type DeviceConnection, type Dispatcher, type SettleVerdict } from "./dispatcher.js";
import { DEVICE_RESULT_INVALID, HostError } from "./errors.js";
import { enrollWithCode, mintPairingCode, type MintedPairingCode } from "./pairing.js";
import * as proposals from "./proposals.js";
import type { Proposal } from "./proposals.js";
import type { AnnouncedTool, HelloBody, ResultBody } from "../../protocol/index.js";

/**
 * The host connector's use cases, between the routes (thin, HTTP) and the dispatcher and
 * repositories (pure). Knows who owns what; knows nothing of requests and replies.
 */
export interface HostService {
  readonly dispatcher: Dispatcher;
  /** The device a device token names (normally answered from the invalidated cache, no query). */
  verifyDeviceToken(token: string): Promise<TokenVerdict>;
  mintPairingCode(userId: string): Promise<MintedPairingCode>;
  enroll(input: { code: string; name: string; platform: string }): Promise<{ deviceId: string; token: string }>;
  hello(device: DeviceIdentity, hello: HelloBody): Promise<void>;
  /**
   * Makes the device's stream live: fails with HELLO_REQUIRED before any hello (nothing opened yet);
   * else calls `open` (which starts the stream) and connects the channel it returns.
   */
  attachStream(device: DeviceIdentity, open: () => DeviceChannel): Promise<DeviceConnection>;
  detachStream(connection: DeviceConnection): Promise<void>;
  /** The class of the tool a call awaiting its result went to; UNKNOWN_CALL, WRONG_DEVICE or RESULT_ALREADY_RECEIVED otherwise. */
  expectResult(device: DeviceIdentity, callId: string): Promise<AnnouncedTool["class"]>;
  settle(device: DeviceIdentity, result: ResultBody): Promise<void>;
  /**
   * The device's result for `callId` was refused at the result route (`refusal`: what the device was
   * told): the call ends now with DEVICE_RESULT_INVALID rather than at its timeout. Only a call awaited
   * from this very device ends; for any other id nothing changes.
   */
  refuseResult(device: DeviceIdentity, callId: string, refusal: { code: string; message: string }): Promise<void>;
  listDevices(userId: string): Promise<DeviceView[]>;
  /** The owner's unrevoked device (id, owner, name), from the invalidated cache when it can; else DEVICE_NOT_FOUND. */
  ownedDevice(userId: string, deviceId: string): Promise<DeviceIdentity>;
  /** The owner's device with its live tools (when online), or DEVICE_NOT_FOUND. */
  device(userId: string, deviceId: string): Promise<DeviceView>;
  revoke(userId: string, deviceId: string): Promise<void>;
  /** Runs a read or action tool, or proposes a mutate tool's change (plan mode, stored). */
  call(caller: Caller, request: CallRequest): Promise<CallOutcome>;
  approve(caller: Caller, proposalId: string): Promise<{ proposal: Proposal; result: unknown }>;
  reject(caller: Caller, proposalId: string): Promise<Proposal>;
  pendingProposals(userId: string): Promise<Proposal[]>;
  /** One of the owner's proposals, in any state, or PROPOSAL_NOT_FOUND. */
  proposal(userId: string, proposalId: string): Promise<Proposal>;
  /** The owner's read tools for a chat assistant, results fenced once as untrusted (see assistant.ts). */
  assistantTools(userId: string): Promise<AssistantTool[]>;
  /**
   * Re-checks a user whose account changed: a deactivated or deleted owner's live device streams
   * are closed at once (their tokens stop verifying too).
   */
  ownerChanged(userId: string): Promise<void>;
  /** Tells `listener` when the owner's devices or proposals change (for live pages). */
  watch(userId: string, listener: (topic: WatchTopic) => void): () => void;
}

export type WatchTopic = "devices" | "proposals";

export interface Caller {
  userId: string;
  actor: AuditActor;
  /** The credential behind the call, for the audit log (see audit.ts). */
  credential?: string;
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

export type CallOutcome =
  | { kind: "result"; tool: AnnouncedTool; result: unknown }
  | { kind: "proposal"; tool: AnnouncedTool; proposal: Proposal };

export interface DeviceView extends DeviceSummary {
  online: boolean;
}

export interface HostServiceOptions {
  db: Kysely<Database>;
  dispatcher: Dispatcher;
  /** Where audit rows go (batched, off the request path: src/db/batch-writer.ts). */
  audit: BatchWriter<AuditRow>;
  /** Token and ownership answers, invalidated by database notifications; without it every check queries. */
  cache?: DeviceCache;
  /** Wait for an apply; a tool writing a tree may take longer than a read. */
  applyTimeoutMs?: number;
  proposalTtlMs?: number;
  /** Called when something in the background (audit, last-seen) fails; the request still succeeds. */
  onBackgroundError?: (error: unknown) => void;
}

export function createHostService(options: HostServiceOptions): HostService {
  const { db, dispatcher, audit: auditLog, cache } = options;
  const applyTimeoutMs = options.applyTimeoutMs ?? 120_000;
  /** Owners of the streams this replica holds: to close them when their owner is deactivated. */
  const owners = new Map<string, string>();
  const watchers = new Map<string, Set<(topic: WatchTopic) => void>>();
  const background = (promise: Promise<unknown>) => {
    promise.catch((error: unknown) => options.onBackgroundError?.(error));
  };

  const notify = (userId: string, topic: WatchTopic) => {
    for (const listener of watchers.get(userId) ?? []) {
      try {
        listener(topic);
      } catch {
        /* a watcher's failure is its own */
      }
    }
  };

  // Presence changes arrive on every replica, whichever holds the stream: live pages follow them.
  dispatcher.onPresence(({ deviceId, userId, online }) => {
    if (!online && owners.get(deviceId) === userId && !dispatcher.isOnline(deviceId)) owners.delete(deviceId);
    notify(userId, "devices");
  });

  const view = (summary: DeviceSummary): DeviceView => {
    const online = dispatcher.isOnline(summary.id);
    return { ...summary, tools: online ? [...(dispatcher.toolsOf(summary.id) ?? summary.tools)] : summary.tools, online };
  };

  /** The caller's own unrevoked device, from the invalidated cache when it can (no query). */
  const ownedDevice = async (userId: string, deviceId: string): Promise<DeviceIdentity> => {
    const cached = cache?.ownedDevice(deviceId);
    if (cached?.userId === userId) return cached;
    const version = cache?.version ?? 0;
    const summary = await devices.findDevice(db, userId, deviceId);
    if (!summary) throw new HostError("DEVICE_NOT_FOUND", "You have no device with this id");
    const identity = { id: summary.id, userId, name: summary.name };
    cache?.storeOwner(identity, version);
    return identity;
  };

  const codeOf = (error: unknown) => (error instanceof DeviceCallError || error instanceof HostError ? error.code : "INTERNAL");

  const service: HostService = {
    dispatcher,

    verifyDeviceToken: (token) => devices.verifyDeviceToken(db, token, cache),

    async mintPairingCode(userId) {
      const minted = await mintPairingCode(db, userId);
      audit.record(auditLog, { userId, event: "pair", actor: "session", outcome: "ok" });
      return minted;
    },

    async enroll(input) {
      const outcome = await enrollWithCode(db, input);
      if (!outcome.ok) {
        const refusals = {
          invalid: ["PAIRING_CODE_INVALID", "This pairing code is not valid; check it, or mint a new one"],
          expired: ["PAIRING_CODE_EXPIRED", "This pairing code has expired; mint a new one"],
          used: ["PAIRING_CODE_USED", "This pairing code was already used; mint a new one"],
          void: ["PAIRING_CODE_VOID", "This pairing code was voided after too many wrong attempts; mint a new one"],
        } as const;
        const [code, message] = refusals[outcome.reason];
        throw new HostError(code, message);
      }
      audit.record(auditLog, { userId: outcome.userId, deviceId: outcome.deviceId, event: "enroll", actor: "device", outcome: "ok" });
      notify(outcome.userId, "devices");
      return { deviceId: outcome.deviceId, token: outcome.token };
    },

    async hello(device, hello) {
      await devices.recordHello(db, device.id, { tools: hello.tools, roots: hello.roots, agent: hello.agent ?? null });
      notify(device.userId, "devices");
    },

    async attachStream(device, open) {
      const tools = await devices.announcedTools(db, device.id);
      if (!tools) throw new HostError("HELLO_REQUIRED", "Announce the device's tools with POST /api/host/hello before opening the stream");
      if (!dispatcher.available()) throw new DeviceCallError("DISPATCH_UNAVAILABLE", "Calls cannot be routed right now; reconnect shortly");
      owners.set(device.id, device.userId);
      const connection = await dispatcher.connect(device, tools, open());
      background(devices.touchDevice(db, device.id, true));
      notify(device.userId, "devices");
      return connection;
    },

    async detachStream(connection) {
      connection.detach();
      await devices.touchDevice(db, connection.deviceId, true);
    },

    async expectResult(device, callId) {
      const expectation = await dispatcher.expects(device.id, callId);
      if (expectation.verdict !== "accepted") throw settleRefusal(expectation.verdict);
      return expectation.toolClass;
    },

    async settle(device, result) {
      const verdict = await dispatcher.settle(device.id, result);
      if (verdict !== "accepted") throw settleRefusal(verdict);
      background(devices.touchDevice(db, device.id));
    },

    async refuseResult(device, callId, refusal) {
      const error = { code: DEVICE_RESULT_INVALID, message: `The device's result was refused by the server (${refusal.code}: ${refusal.message})` };
      await dispatcher.settle(device.id, { id: callId, ok: false, error }).catch((failure: unknown) => options.onBackgroundError?.(failure));
    },

    async listDevices(userId) {
      return (await devices.listDevices(db, userId)).map(view);
    },

    ownedDevice,

    async device(userId, deviceId) {
      const summary = await devices.findDevice(db, userId, deviceId);
      if (!summary) throw new HostError("DEVICE_NOT_FOUND", "You have no device with this id");
      return view(summary);
    },

    async revoke(userId, deviceId) {
      if (!(await devices.revokeDevice(db, userId, deviceId))) {
        throw new HostError("DEVICE_NOT_FOUND", "You have no device with this id");
      }
      cache?.dropDevice(deviceId);
      await dispatcher.disconnect(deviceId, "revoked", "This device's credential was revoked; pair it again");
      owners.delete(deviceId);
      audit.record(auditLog, { userId, deviceId, event: "revoke", actor: "session", outcome: "ok" });
      notify(userId, "devices");
      notify(userId, "proposals");
    },

    async call(caller, request) {
      await ownedDevice(caller.userId, request.deviceId);
      const tool = dispatcher.toolsOf(request.deviceId)?.find((t) => t.name === request.tool);
      if (tool && request.requireClass && tool.class !== request.requireClass) {
        throw new HostError("NOT_A_READ_TOOL", `"${tool.name}" is a ${tool.class} tool; only ${request.requireClass} tools are allowed here`);
      }
      const started = performance.now();
      const entry = { userId: caller.userId, deviceId: request.deviceId, actor: caller.actor, credential: caller.credential ?? null, tool: request.tool, input: request.input };
      const mode = tool?.class === "mutate" ? "plan" : "run";
      let result: unknown;
      try {
        result = await dispatcher.call(request.deviceId, request.tool, request.input, {
          mode,
          ...(request.timeoutMs !== undefined ? { timeoutMs: request.timeoutMs } : {}),
          ...(request.signal ? { signal: request.signal } : {}),
        });
      } catch (error) {
        audit.record(auditLog, { ...entry, event: "call", mode, outcome: "error", errorCode: codeOf(error), durationMs: performance.now() - started });
        throw error;
      }
      const durationMs = performance.now() - started;
      // `tool` is known here: an unknown tool fails in the dispatcher.
      if (tool!.class !== "mutate") {
        audit.record(auditLog, { ...entry, event: "call", mode, outcome: "ok", durationMs });
        return { kind: "result", tool: tool!, result };
      }
      const plan = result as { diff?: unknown; summary?: unknown } | null;
      if (typeof plan?.diff !== "string") {
        audit.record(auditLog, { ...entry, event: "propose", mode, outcome: "error", errorCode: "NOT_A_PROPOSAL", durationMs });
        throw new HostError("NOT_A_PROPOSAL", `The device's plan for "${request.tool}" returned no diff`);
      }
      const oversized = tooLargeToStore(plan.diff);
      if (oversized) {
        audit.record(auditLog, { ...entry, event: "propose", mode, outcome: "error", errorCode: "DIFF_TOO_LARGE", durationMs });
        throw new HostError(
          "DIFF_TOO_LARGE",
          `The device's plan for "${request.tool}" is too large to review: ${oversized.lines} lines, ${Math.ceil(oversized.bytes / 1024)} KB ` +
            `(the limit is ${MAX_STORED_DIFF_LINES} lines and ${MAX_STORED_DIFF_BYTES / 1024} KB). Nothing was stored; split it into smaller changes.`,
        );
      }
      const proposal = await proposals.create(db, {
        userId: caller.userId,
        deviceId: request.deviceId,
        tool: request.tool,
        input: request.input,
        diff: plan.diff,
        summary: typeof plan.summary === "string" ? plan.summary : "",
        ...(options.proposalTtlMs !== undefined ? { ttlMs: options.proposalTtlMs } : {}),
      });
      audit.record(auditLog, { ...entry, event: "propose", mode, proposalId: proposal.id, outcome: "ok", durationMs });
      notify(caller.userId, "proposals");
      return { kind: "proposal", tool: tool!, proposal };
    },

    async approve(caller, proposalId) {
      const decision = await proposals.approve(db, caller.userId, proposalId);
      if (!decision.ok) throw refusal(decision);
      const { proposal } = decision;
      const entry = { userId: caller.userId, deviceId: proposal.deviceId, proposalId, actor: caller.actor, tool: proposal.tool };
      audit.record(auditLog, { ...entry, event: "approve", outcome: "ok" });
      notify(caller.userId, "proposals");
      const started = performance.now();
      try {
        // The stored input, exactly as proposed: the approving request carries only the id.
        const result = await dispatcher.call(proposal.deviceId, proposal.tool, proposal.input, { mode: "apply", timeoutMs: applyTimeoutMs, expectedPlan: { diff: proposal.diff, summary: proposal.summary } });
        const finished = await proposals.finish(db, proposalId, { ok: true, result });
        audit.record(auditLog, { ...entry, event: "apply", mode: "apply", input: proposal.input, outcome: "ok", durationMs: performance.now() - started });
        return { proposal: finished ?? proposal, result };
      } catch (error) {
        if (error instanceof DeviceCallError && error.code === "DEVICE_OFFLINE") {
          // Nothing reached the device: the proposal waits for another approval.
          await proposals.release(db, proposalId);
        } else {
          const message = error instanceof Error ? error.message : String(error);
          await proposals.finish(db, proposalId, { ok: false, code: codeOf(error), message });
        }
        audit.record(auditLog, {
          ...entry,
          event: "apply",
          mode: "apply",
          input: proposal.input,
          outcome: "error",
          errorCode: codeOf(error),
          durationMs: performance.now() - started,
        });
        throw error;
      } finally {
        notify(caller.userId, "proposals");
      }
    },

    async reject(caller, proposalId) {
      const decision = await proposals.reject(db, caller.userId, proposalId);
      if (!decision.ok) throw refusal(decision);
      audit.record(auditLog, {
        userId: caller.userId,
        deviceId: decision.proposal.deviceId,
        proposalId,
        actor: caller.actor,
        tool: decision.proposal.tool,
        event: "reject",
        outcome: "ok",
      });
      notify(caller.userId, "proposals");
      return decision.proposal;
    },

    pendingProposals: (userId) => proposals.listPending(db, userId),

    async proposal(userId, proposalId) {
      const found = await proposals.get(db, userId, proposalId);
      if (!found) throw new HostError("PROPOSAL_NOT_FOUND", "You have no proposal with this id");
      return found;
    },

    assistantTools: (userId) => assistantTools(service, userId),

    async ownerChanged(userId) {
      cache?.dropUser(userId);
      const live = [...owners].filter(([, owner]) => owner === userId).map(([deviceId]) => deviceId);
      if (live.length === 0) return;
      const user = await db.selectFrom("user").select("deactivatedAt").where("id", "=", userId).executeTakeFirst();
      if (user && !user.deactivatedAt) return;
      for (const deviceId of live) {
        await dispatcher.disconnect(deviceId, "revoked", "The owner's account was deactivated or deleted; pair the device again");
        owners.delete(deviceId);
      }
    },

    watch(userId, listener) {
      let set = watchers.get(userId);
      if (!set) watchers.set(userId, (set = new Set()));
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) watchers.delete(userId);
      };
    },
  };
  return service;
}

function settleRefusal(verdict: Exclude<SettleVerdict, "accepted">): HostError {
  if (verdict === "unknown_call") return new HostError("UNKNOWN_CALL", "No call with this id is waiting for a result");
  if (verdict === "wrong_device") return new HostError("WRONG_DEVICE", "This call was sent to another device");
  return new HostError("RESULT_ALREADY_RECEIVED", "This call already has its result (or was given up)");
}

function refusal(decision: Exclude<proposals.Decision, { ok: true }>): HostError {
  if (decision.reason === "not_found") return new HostError("PROPOSAL_NOT_FOUND", "You have no proposal with this id");
  if (decision.reason === "expired") return new HostError("PROPOSAL_EXPIRED", "This proposal expired; run the tool again for a fresh diff");
  return new HostError("ALREADY_DECIDED", `This proposal was already decided (${decision.status})`);
}
