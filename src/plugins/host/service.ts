import type { Kysely } from "kysely";
import type { BatchWriter } from "../../db/batch-writer.js";
import type { Database } from "../../db/schema.js";
import type { AnnouncedTool, HelloBody, ResultBody } from "../../protocol/index.js";
import type { AuditRow } from "../activity/audit-plugin.js";
import { assistantTools, type AssistantTool } from "./assistant.js";
import * as audit from "./audit.js";
import * as grants from "./credential-grants.js";
import { grantAllows, type DeviceGrant } from "./credential-grants.js";
import { createDeviceAccess, deviceNotFound } from "./device-access.js";
import type { DeviceCache } from "./device-cache.js";
import { createDeviceStreams } from "./device-streams.js";
import * as devices from "./devices.js";
import type { DeviceIdentity, DeviceView, TokenVerdict } from "./devices.js";
import { DeviceCallError, type DeviceChannel, type DeviceConnection, type Dispatcher } from "./dispatcher.js";
import { createEnrollment } from "./enrollment.js";
import { HostError } from "./errors.js";
import type { MintedPairingCode } from "./pairing.js";
import { createProposalService, type BlobsFor } from "./proposal-service.js";
import {
  DEFAULT_PENDING_LIMITS,
  DEFAULT_RETENTION_MS,
  type PendingLimits,
  type PendingPage,
  type DecidedSummary,
  type PendingWithDiff,
  type Proposal,
  type ProposalSummary,
  type SweepOutcome,
} from "./proposals.js";
import { createToolCalls, type CallOutcome, type CallRequest, type Caller } from "./tool-calls.js";
import { createWatchers, type WatchTopic } from "./watchers.js";

export type { CallOutcome, CallRequest, Caller, DeviceView, WatchTopic };

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
  pendingProposals(
    userId: string,
    page?: { cursor?: string | undefined; limit?: number | undefined },
    grant?: DeviceGrant,
  ): Promise<PendingPage<ProposalSummary>>;
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
  const background = (promise: Promise<unknown>) => {
    promise.catch((error: unknown) => options.onBackgroundError?.(error));
  };
  const { notify, watch } = createWatchers();
  const access = createDeviceAccess({ db, dispatcher, cache });
  const streams = createDeviceStreams({ db, dispatcher, cache, notify, background, onBackgroundError: options.onBackgroundError });
  const grantStore = grants.createGrantStore(db);
  const codeOf = (error: unknown) => (error instanceof DeviceCallError || error instanceof HostError ? error.code : "INTERNAL");
  const proposalService = createProposalService({
    db,
    dispatcher,
    audit: auditLog,
    notify,
    applyTimeoutMs: options.applyTimeoutMs ?? 120_000,
    proposalTtlMs: options.proposalTtlMs,
    ...(options.blobsFor ? { blobsFor: options.blobsFor } : {}),
    pendingLimits: options.pendingLimits ?? DEFAULT_PENDING_LIMITS,
    retentionMs: options.proposalRetentionMs ?? DEFAULT_RETENTION_MS,
    codeOf,
  });
  const call = createToolCalls({
    dispatcher,
    audit: auditLog,
    ownedDevice: access.ownedDevice,
    proposals: proposalService,
    codeOf,
    onReadResult: options.onReadResult,
    blobsFor: options.blobsFor,
  });
  const { disconnect, ...streamMethods } = streams;

  const service: HostService = {
    dispatcher,
    verifyDeviceToken: devices.createDeviceTokenVerifier(db, cache),
    ...createEnrollment({ db, audit: auditLog, notify }),
    ...streamMethods,
    ...access,
    deviceGrant: (userId, credential) => grantStore.grantOf(userId, credential),

    async grantDevices(userId, credential, deviceIds) {
      const grant = deviceIds === undefined ? undefined : await grants.checkGrantableDevices(db, userId, deviceIds);
      await grantStore.set(userId, credential, grant);
    },

    async revoke(userId, deviceId) {
      if (!(await devices.revokeDevice(db, userId, deviceId))) throw deviceNotFound();
      cache?.dropDevice(deviceId);
      await disconnect(deviceId, "This device's credential was revoked; pair it again");
      if (options.onRevoked) background(options.onRevoked(deviceId));
      audit.record(auditLog, { userId, deviceId, event: "revoke", actor: "session", outcome: "ok" });
      notify(userId, "devices", deviceId);
      notify(userId, "proposals");
    },

    async acknowledge(userId, deviceId) {
      if (!(await devices.acknowledgeDevice(db, userId, deviceId))) throw deviceNotFound();
      notify(userId, "devices", deviceId);
    },

    call,
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
    watch,
  };
  return service;
}
