import type { Kysely } from "kysely";
import type { BatchWriter } from "../../db/batch-writer.js";
import { outsideFairShare } from "../../http/fair-share-context.js";
import type { Database } from "../../db/schema.js";
import type { AuditRow } from "../activity/audit-plugin.js";
import { assistantTools, type AssistantTool } from "./assistant.js";
import * as audit from "./audit.js";
import type { AuditActor } from "./audit.js";
import type { DeviceCache } from "./device-cache.js";
import * as devices from "./devices.js";
import * as grants from "./credential-grants.js";
import { grantAllows, type DeviceGrant } from "./credential-grants.js";
import type { DeviceIdentity, DeviceSummary, DeviceView, TokenVerdict } from "./devices.js";
import { DeviceCallError, type DeviceChannel, type DeviceConnection, type Dispatcher } from "./dispatcher.js";
import { DEVICE_RESULT_INVALID, HostError, settleRefusal } from "./errors.js";
import { enrollWithCode, mintPairingCode, type MintedPairingCode } from "./pairing.js";
import { withBuiltinContracts } from "./tool-contracts.js";
import { blobsOption, createProposalService, type BlobsFor } from "./proposal-service.js";
import { DEFAULT_PENDING_LIMITS, DEFAULT_RETENTION_MS, type PendingLimits, type PendingPage, type DecidedSummary, type PendingWithDiff, type Proposal, type ProposalSummary, type SweepOutcome } from "./proposals.js";
import type { AnnouncedTool, HelloBody, ResultBody } from "../../protocol/index.js";

export type { DeviceView };

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
  /**
   * The owner's devices; with a credential's `grant`, only those it names. Every device lookup below takes
   * the same optional grant: a device outside it is DEVICE_NOT_FOUND, exactly like another user's.
   */
  listDevices(userId: string, grant?: DeviceGrant): Promise<DeviceView[]>;
  /** The owner's unrevoked device (id, owner, name), from the invalidated cache when it can; else DEVICE_NOT_FOUND. */
  ownedDevice(userId: string, deviceId: string, grant?: DeviceGrant): Promise<DeviceIdentity>;
  /** The owner's device with its live tools (when online), or DEVICE_NOT_FOUND. */
  device(userId: string, deviceId: string, grant?: DeviceGrant): Promise<DeviceView>;
  /** Which devices a credential (`token:<id>`, `oauth:<client id>`) of the user may touch: undefined for all. */
  deviceGrant(userId: string, credential: string): Promise<DeviceGrant>;
  /**
   * Limits a credential to the owner's chosen devices (undefined: all). Each id must be one of the owner's
   * unrevoked devices, else 400 UNKNOWN_DEVICE.
   */
  grantDevices(userId: string, credential: string, deviceIds: readonly string[] | undefined): Promise<void>;
  revoke(userId: string, deviceId: string): Promise<void>;
  /** The owner confirms a device is theirs: it is no longer marked new. DEVICE_NOT_FOUND when it is not theirs. */
  acknowledge(userId: string, deviceId: string): Promise<void>;
  /** Runs a read or action tool, or proposes a mutate tool's change (plan mode, stored); only on a device the caller's grant names. */
  call(caller: Caller, request: CallRequest): Promise<CallOutcome>;
  approve(caller: Caller, proposalId: string): Promise<{ proposal: Proposal; result: unknown }>;
  reject(caller: Caller, proposalId: string): Promise<Proposal>;
  /** A page of the owner's pending proposals, without diffs; INVALID_CURSOR for a cursor no page gave. */
  pendingProposals(userId: string, page?: { cursor?: string | undefined; limit?: number | undefined }, grant?: DeviceGrant): Promise<PendingPage<ProposalSummary>>;
  /** The same, with the first `diffHeadChars` characters of each diff: what a page renders. */
  pendingWithDiffs(userId: string, page: { cursor?: string | undefined; limit: number; diffHeadChars: number }): Promise<PendingPage<PendingWithDiff>>;
  /** One of the owner's proposals, in any state, or PROPOSAL_NOT_FOUND (also for a device outside `grant`). */
  proposal(userId: string, proposalId: string, grant?: DeviceGrant): Promise<Proposal>;
  /** The owner's latest decided, failed and expired proposals, newest first, without diffs (at most `limit`, default 20). */
  recentlyDecided(userId: string, limit?: number): Promise<DecidedSummary[]>;
  /**
   * Expires pending proposals past their time and clears the diff, input and result of proposals
   * finished longer ago than the retention. Safe on every replica at once (the host plugin runs it
   * periodically).
   */
  sweepProposals(): Promise<SweepOutcome>;
  /** The owner's read tools for a chat assistant, results fenced once as untrusted (see assistant.ts). */
  assistantTools(userId: string): Promise<AssistantTool[]>;
  /**
   * Re-checks a user whose account changed: a deactivated or deleted owner's live device streams
   * are closed at once (their tokens stop verifying too).
   */
  ownerChanged(userId: string): Promise<void>;
  /**
   * Tells `listener` when the owner's devices or proposals change (for live pages), with the device when
   * one device changed (a credential limited to other devices ignores it).
   */
  watch(userId: string, listener: (topic: WatchTopic, deviceId?: string) => void): () => void;
}

export type WatchTopic = "devices" | "proposals";

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

export type CallOutcome =
  | { kind: "result"; tool: AnnouncedTool; result: unknown }
  | { kind: "proposal"; tool: AnnouncedTool; proposal: Proposal };

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
  /** Proposals waiting at once, per user and per device (default 50 and 20): TOO_MANY_PENDING beyond. */
  pendingLimits?: PendingLimits;
  /** How long a decided or expired proposal keeps its diff, input and result (default 7 days). */
  proposalRetentionMs?: number;
  /** Called when something in the background (audit, last-seen) fails; the request still succeeds. */
  onBackgroundError?: (error: unknown) => void;
  /** A read or action result on its way to the caller (the blob plugin puts a handle in place of a `blobSource`). */
  onReadResult?: (caller: Caller, deviceId: string, result: unknown) => Promise<unknown>;
  /** The blobs a call's input names by id, resolved for the device (the blob plugin: the caller's own, complete). */
  blobsFor?: BlobsFor;
  /** After a device is revoked (the blob plugin deletes its blobs). */
  onRevoked?: (deviceId: string) => Promise<void>;
}

export function createHostService(options: HostServiceOptions): HostService {
  const { db, dispatcher, audit: auditLog, cache } = options;
  const applyTimeoutMs = options.applyTimeoutMs ?? 120_000;
  /** Owners of the streams this replica holds: to close them when their owner is deactivated. */
  const owners = new Map<string, string>();
  const watchers = new Map<string, Set<(topic: WatchTopic, deviceId?: string) => void>>();
  const background = (promise: Promise<unknown>) => {
    promise.catch((error: unknown) => options.onBackgroundError?.(error));
  };

  const notify = (userId: string, topic: WatchTopic, deviceId?: string) => {
    for (const listener of watchers.get(userId) ?? []) {
      try {
        listener(topic, deviceId);
      } catch {
        /* a watcher's failure is its own */
      }
    }
  };

  // Presence changes arrive on every replica, whichever holds the stream: live pages follow them.
  dispatcher.onPresence(({ deviceId, userId, online }) => {
    if (!online && owners.get(deviceId) === userId && !dispatcher.isOnline(deviceId)) owners.delete(deviceId);
    notify(userId, "devices", deviceId);
  });

  const view = (summary: DeviceSummary): DeviceView => {
    const online = dispatcher.isOnline(summary.id);
    return { ...summary, tools: online ? [...(dispatcher.toolsOf(summary.id) ?? summary.tools)] : summary.tools, online };
  };

  const notFound = () => new HostError("DEVICE_NOT_FOUND", "You have no device with this id");
  /** The caller's own unrevoked device, from the invalidated cache when it can (no query). */
  const ownedDevice = async (userId: string, deviceId: string, grant?: DeviceGrant): Promise<DeviceIdentity> => {
    if (!grantAllows(grant, deviceId)) throw notFound();
    const cached = cache?.ownedDevice(deviceId);
    if (cached?.userId === userId) return cached;
    const version = cache?.version ?? 0;
    const summary = await devices.findDevice(db, userId, deviceId);
    if (!summary) throw new HostError("DEVICE_NOT_FOUND", "You have no device with this id");
    const identity = { id: summary.id, userId, name: summary.name };
    cache?.storeOwner(identity, version);
    return identity;
  };

  const grantStore = grants.createGrantStore(db);
  const codeOf = (error: unknown) => (error instanceof DeviceCallError || error instanceof HostError ? error.code : "INTERNAL");
  const proposalService = createProposalService({
    db,
    dispatcher,
    audit: auditLog,
    notify,
    applyTimeoutMs,
    proposalTtlMs: options.proposalTtlMs,
    ...(options.blobsFor ? { blobsFor: options.blobsFor } : {}),
    pendingLimits: options.pendingLimits ?? DEFAULT_PENDING_LIMITS,
    retentionMs: options.proposalRetentionMs ?? DEFAULT_RETENTION_MS,
    codeOf,
  });

  const service: HostService = {
    dispatcher,

    verifyDeviceToken: devices.createDeviceTokenVerifier(db, cache),

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
      notify(outcome.userId, "devices", outcome.deviceId);
      return { deviceId: outcome.deviceId, token: outcome.token };
    },

    async hello(device, hello) {
      // Built-in tools are stored (and so dispatched, listed and shown) with the server's own contract.
      await devices.recordHello(db, device.id, { tools: withBuiltinContracts(hello.tools), roots: hello.roots, agent: hello.agent ?? null });
      notify(device.userId, "devices", device.id);
    },

    async attachStream(device, open) {
      const tools = await devices.announcedTools(db, device.id);
      if (!tools) throw new HostError("HELLO_REQUIRED", "Announce the device's tools with POST /api/host/hello before opening the stream");
      if (!dispatcher.available()) throw new DeviceCallError("DISPATCH_UNAVAILABLE", "Calls cannot be routed right now; reconnect shortly");
      owners.set(device.id, device.userId);
      const connection = await dispatcher.connect(device, tools, open());
      background(devices.touchDevice(db, device.id, true));
      notify(device.userId, "devices", device.id);
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

    async listDevices(userId, grant) {
      return (await devices.listDevices(db, userId)).filter((device) => grantAllows(grant, device.id)).map(view);
    },

    ownedDevice,

    deviceGrant: (userId, credential) => grantStore.grantOf(userId, credential),

    async grantDevices(userId, credential, deviceIds) {
      const grant = deviceIds === undefined ? undefined : await grants.checkGrantableDevices(db, userId, deviceIds);
      await grantStore.set(userId, credential, grant);
    },

    async device(userId, deviceId, grant) {
      if (!grantAllows(grant, deviceId)) throw notFound();
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
      if (options.onRevoked) background(options.onRevoked(deviceId));
      audit.record(auditLog, { userId, deviceId, event: "revoke", actor: "session", outcome: "ok" });
      notify(userId, "devices", deviceId);
      notify(userId, "proposals");
    },

    async acknowledge(userId, deviceId) {
      if (!(await devices.acknowledgeDevice(db, userId, deviceId))) throw new HostError("DEVICE_NOT_FOUND", "You have no device with this id");
      notify(userId, "devices", deviceId);
    },

    async call(caller, request) {
      const device = await ownedDevice(caller.userId, request.deviceId, caller.deviceIds);
      const tool = dispatcher.toolsOf(request.deviceId)?.find((t) => t.name === request.tool);
      if (tool && request.requireClass && tool.class !== request.requireClass) {
        throw new HostError("NOT_A_READ_TOOL", `"${tool.name}" is a ${tool.class} tool; only ${request.requireClass} tools are allowed here`);
      }
      const started = performance.now();
      const entry = { userId: caller.userId, deviceId: request.deviceId, actor: caller.actor, credential: caller.credential ?? null, tool: request.tool, input: request.input };
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
    },

    approve: proposalService.approve,
    reject: proposalService.reject,
    pendingProposals: proposalService.pendingProposals,
    pendingWithDiffs: proposalService.pendingWithDiffs,
    async proposal(userId, proposalId, grant) {
      const found = await proposalService.proposal(userId, proposalId);
      // A proposal on a device outside the grant is as unknown as another user's.
      if (!grantAllows(grant, found.deviceId)) throw new HostError("PROPOSAL_NOT_FOUND", "You have no proposal with this id");
      return found;
    },
    recentlyDecided: proposalService.recentlyDecided,
    sweepProposals: proposalService.sweepProposals,

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
