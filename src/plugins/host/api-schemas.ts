/**
 * What the owner's JSON API under `/api/host` answers. These schemas are the whole of each response:
 * Fastify writes only the properties named here, so a field added to a device or a proposal later
 * stays on the server until someone adds it to the API on purpose.
 */
import { Type } from "@sinclair/typebox";
import { DateTime, Nullable } from "../../http/response-schemas.js";
import { ToolClassSchema } from "../../protocol/index.js";

/** Any JSON value (a tool's input or result, as the device gave it); absent when there is none. */
const AnyJson = Type.Optional(Type.Unknown());

/** A tool as the device announced it; its input schema is passed on whole (every JSON Schema keyword). */
const ToolJson = Type.Object({
  name: Type.String(),
  description: Type.String(),
  inputSchema: Type.Record(Type.String(), Type.Unknown()),
  class: ToolClassSchema,
});

export const DeviceJson = Type.Object({
  id: Type.String(),
  name: Type.String(),
  platform: Type.String(),
  online: Type.Boolean(),
  lastSeenAt: Nullable(DateTime),
  createdAt: DateTime,
  /** The device program and its version, e.g. `tether-host/0.1.0`; null until its first hello. */
  agent: Nullable(Type.String()),
  tools: Type.Array(ToolJson),
  roots: Type.Array(Type.String()),
  /** The last update the device reported (`POST /api/host/update-report`), with when the server heard of it. */
  lastUpdate: Nullable(
    Type.Object({
      ok: Type.Boolean(),
      from: Type.String(),
      to: Type.Optional(Type.String()),
      trigger: Type.String(),
      code: Type.Optional(Type.String()),
      message: Type.Optional(Type.String()),
      at: Type.String(),
      receivedAt: Type.String(),
    }),
  ),
});

export const ProposalStatus = Type.Union((["pending", "applying", "applied", "failed", "rejected", "expired"] as const).map((status) => Type.Literal(status)));

/** A proposal as lists show it: no diff, input or result (those come one proposal at a time). */
export const ProposalSummaryJson = Type.Object({
  id: Type.String(),
  deviceId: Type.String(),
  tool: Type.String(),
  summary: Type.String(),
  status: ProposalStatus,
  createdAt: DateTime,
  expiresAt: DateTime,
  decidedAt: Nullable(DateTime),
  finishedAt: Nullable(DateTime),
  error: Nullable(Type.Object({ code: Type.String(), message: Type.String() })),
  /** The diff's size, in bytes (UTF-8) and lines; kept after the diff itself is purged. */
  diffBytes: Type.Integer(),
  diffLines: Type.Integer(),
  /** When the retention cleared the diff, input and result; null while they are kept. */
  purgedAt: Nullable(DateTime),
  /** The proposal's own page, where the owner reviews, approves or rejects it. */
  url: Type.String(),
  /**
   * Who proposed it: the actor (`session`, `token`, `mcp`, `assistant`), the credential (`token:<id>`,
   * `oauth:<client id>`) and its name when the proposal was made; null when that was not recorded.
   */
  proposer: Nullable(Type.Object({ actor: Type.String(), credential: Nullable(Type.String()), name: Nullable(Type.String()) })),
  /** Who approved or rejected it (`session`: the owner, signed in); null while pending and when it expired. */
  decidedBy: Nullable(Type.String()),
});

/** One proposal, whole: its diff (null once purged), the stored input, and the apply's result. */
export const ProposalJson = Type.Object({
  ...ProposalSummaryJson.properties,
  input: AnyJson,
  diff: Nullable(Type.String()),
  result: AnyJson,
});

export const PairingCodeJson = Type.Object({ code: Type.String(), expiresAt: DateTime });
export const DeviceListJson = Type.Object({ devices: Type.Array(DeviceJson) });
/** A page of pending proposals, oldest first: `nextCursor` asks for the next (null on the last), `total` counts every page. */
export const ProposalListJson = Type.Object({ proposals: Type.Array(ProposalSummaryJson), nextCursor: Nullable(Type.String()), total: Type.Integer() });

/** `POST /api/host/calls`, 200: a read or action tool's result, raw (fencing is for models, not scripts). */
export const CallResultJson = Type.Object({ tool: Type.String(), class: ToolClassSchema, result: AnyJson });
/** `POST /api/host/calls`, 202: a mutate tool's proposed change, waiting for the owner. */
export const CallProposedJson = Type.Object({
  proposalId: Type.String(),
  tool: Type.String(),
  diff: Type.String(),
  summary: Type.String(),
  expiresAt: DateTime,
  /** The proposal's own page, where the owner approves or rejects it. */
  url: Type.String(),
});

export const ApprovedJson = Type.Object({ proposalId: Type.String(), status: ProposalStatus, result: AnyJson });
export const RejectedJson = Type.Object({ proposalId: Type.String(), status: ProposalStatus });
