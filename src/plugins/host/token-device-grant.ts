import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import type { TokenGrantKind } from "../session/token-grants.js";
import { checkGrantableDevices, deviceGrantsOf, setDeviceGrant, tokenCredential } from "./credential-grants.js";
import type { HostService } from "./service.js";

/**
 * The "devices" grant of API tokens, which the host plugin registers with the session plugin's token
 * service: `POST /api/tokens` with `{"grants": {"devices": [...]}}` and the settings form's device
 * choices. Stored in `host_device_grant` under `token:<id>`; enforced by the host service.
 */
export function deviceTokenGrant(db: Kysely<Database>, host: HostService): TokenGrantKind {
  return {
    name: "devices",
    label: "Devices",
    hint: "Tick devices to limit the token to them; leave all unticked for every device, including ones you pair later.",
    goneLabel: "a removed device",
    check: (userId, ids) => checkGrantableDevices(db, userId, ids),
    store: (userId, tokenId, ids) => host.grantDevices(userId, tokenCredential(tokenId), ids),
    async load(userId, tokenIds) {
      const byCredential = await deviceGrantsOf(db, userId, tokenIds.map(tokenCredential));
      return new Map(tokenIds.filter((id) => byCredential.has(tokenCredential(id))).map((id) => [id, byCredential.get(tokenCredential(id))!]));
    },
    forget: (userId, tokenId) => setDeviceGrant(db, userId, tokenCredential(tokenId), undefined),
    async choices(userId) {
      return (await host.listDevices(userId)).map((device) => ({ id: device.id, label: `${device.name} (${device.platform})` }));
    },
  };
}
