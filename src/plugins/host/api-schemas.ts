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
});

const ProposalStatus = Type.Union((["pending", "applying", "applied", "failed", "rejected", "expired"] as const).map((status) => Type.Literal(status)));

export const ProposalJson = Type.Object({
  id: Type.String(),
  deviceId: Type.String(),
  tool: Type.String(),
  input: AnyJson,
  diff: Type.String(),
  summary: Type.String(),
  status: ProposalStatus,
  createdAt: DateTime,
  expiresAt: DateTime,
  decidedAt: Nullable(DateTime),
  finishedAt: Nullable(DateTime),
  result: AnyJson,
  error: Nullable(Type.Object({ code: Type.String(), message: Type.String() })),
});

export const PairingCodeJson = Type.Object({ code: Type.String(), expiresAt: DateTime });
export const DeviceListJson = Type.Object({ devices: Type.Array(DeviceJson) });
export const ProposalListJson = Type.Object({ proposals: Type.Array(ProposalJson) });

/** `POST /api/host/calls`, 200: a read or action tool's result, raw (fencing is for models, not scripts). */
export const CallResultJson = Type.Object({ tool: Type.String(), class: ToolClassSchema, result: AnyJson });
/** `POST /api/host/calls`, 202: a mutate tool's proposed change, waiting for the owner. */
export const CallProposedJson = Type.Object({ proposalId: Type.String(), tool: Type.String(), diff: Type.String(), summary: Type.String(), expiresAt: DateTime });

export const ApprovedJson = Type.Object({ proposalId: Type.String(), status: ProposalStatus, result: AnyJson });
export const RejectedJson = Type.Object({ proposalId: Type.String(), status: ProposalStatus });
