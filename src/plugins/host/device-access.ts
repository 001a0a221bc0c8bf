import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import { grantAllows, type DeviceGrant } from "./credential-grants.js";
import type { DeviceCache } from "./device-cache.js";
import * as devices from "./devices.js";
import type { DeviceIdentity, DeviceSummary, DeviceView } from "./devices.js";
import type { Dispatcher } from "./dispatcher.js";
import { HostError } from "./errors.js";

/** Finding the owner's devices, within a credential's grant: a device outside it is DEVICE_NOT_FOUND, like another user's. */
export interface DeviceAccess {
  listDevices: (userId: string, grant?: DeviceGrant) => Promise<DeviceView[]>;
  /** The caller's own unrevoked device, from the invalidated cache when it can (no query). */
  ownedDevice: (userId: string, deviceId: string, grant?: DeviceGrant) => Promise<DeviceIdentity>;
  device: (userId: string, deviceId: string, grant?: DeviceGrant) => Promise<DeviceView>;
}

export function deviceNotFound(): HostError {
  return new HostError("DEVICE_NOT_FOUND", "You have no device with this id");
}

export function createDeviceAccess({ db, dispatcher, cache }: { db: Kysely<Database>; dispatcher: Dispatcher; cache: DeviceCache | undefined }): DeviceAccess {
  /** A stored device with its live tools when it is online (the stored ones otherwise). */
  const view = (summary: DeviceSummary): DeviceView => {
    const online = dispatcher.isOnline(summary.id);
    return { ...summary, tools: online ? [...(dispatcher.toolsOf(summary.id) ?? summary.tools)] : summary.tools, online };
  };

  return {
    async listDevices(userId, grant) {
      return (await devices.listDevices(db, userId)).filter((device) => grantAllows(grant, device.id)).map(view);
    },

    async ownedDevice(userId, deviceId, grant) {
      if (!grantAllows(grant, deviceId)) throw deviceNotFound();
      const cached = cache?.ownedDevice(deviceId);
      if (cached?.userId === userId) return cached;
      const version = cache?.version ?? 0;
      const summary = await devices.findDevice(db, userId, deviceId);
      if (!summary) throw deviceNotFound();
      const identity = { id: summary.id, userId, name: summary.name };
      cache?.storeOwner(identity, version);
      return identity;
    },

    async device(userId, deviceId, grant) {
      if (!grantAllows(grant, deviceId)) throw deviceNotFound();
      const summary = await devices.findDevice(db, userId, deviceId);
      if (!summary) throw deviceNotFound();
      return view(summary);
    },
  };
}
