import type { Kysely } from "kysely";
import type { BatchWriter } from "../../db/batch-writer.js";
import type { Database } from "../../db/schema.js";
import type { HelloBody } from "../../protocol/index.js";
import type { AuditRow } from "../activity/audit-plugin.js";
import * as audit from "./audit.js";
import * as devices from "./devices.js";
import type { DeviceIdentity } from "./devices.js";
import { HostError } from "./errors.js";
import { enrollWithCode, mintPairingCode, type MintedPairingCode } from "./pairing.js";
import { withBuiltinContracts } from "./tool-contracts.js";
import type { Watchers } from "./watchers.js";

/** How a device joins: its owner mints a pairing code, the device enrolls with it and announces its tools. */
export interface Enrollment {
  mintPairingCode: (userId: string) => Promise<MintedPairingCode>;
  enroll: (input: { code: string; name: string; platform: string }) => Promise<{ deviceId: string; token: string }>;
  hello: (device: DeviceIdentity, hello: HelloBody) => Promise<void>;
}

const REFUSALS = {
  invalid: ["PAIRING_CODE_INVALID", "This pairing code is not valid; check it, or mint a new one"],
  expired: ["PAIRING_CODE_EXPIRED", "This pairing code has expired; mint a new one"],
  used: ["PAIRING_CODE_USED", "This pairing code was already used; mint a new one"],
  void: ["PAIRING_CODE_VOID", "This pairing code was voided after too many wrong attempts; mint a new one"],
} as const;

export function createEnrollment({
  db,
  audit: auditLog,
  notify,
}: {
  db: Kysely<Database>;
  audit: BatchWriter<AuditRow>;
  notify: Watchers["notify"];
}): Enrollment {
  return {
    async mintPairingCode(userId) {
      const minted = await mintPairingCode(db, userId);
      audit.record(auditLog, { userId, event: "pair", actor: "session", outcome: "ok" });
      return minted;
    },

    async enroll(input) {
      const outcome = await enrollWithCode(db, input);
      if (!outcome.ok) {
        const [code, message] = REFUSALS[outcome.reason];
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
  };
}
