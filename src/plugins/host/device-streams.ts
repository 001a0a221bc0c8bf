import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import type { AnnouncedTool, ResultBody } from "../../protocol/index.js";
import type { DeviceCache } from "./device-cache.js";
import * as devices from "./devices.js";
import type { DeviceIdentity } from "./devices.js";
import { DeviceCallError, type DeviceChannel, type DeviceConnection, type Dispatcher } from "./dispatcher.js";
import { DEVICE_RESULT_INVALID, HostError, settleRefusal } from "./errors.js";
import type { Watchers } from "./watchers.js";

/** A device's live stream on this replica, and the results it posts back (see HostService for each method). */
export interface DeviceStreams {
  attachStream: (device: DeviceIdentity, open: () => DeviceChannel) => Promise<DeviceConnection>;
  detachStream: (connection: DeviceConnection) => Promise<void>;
  expectResult: (device: DeviceIdentity, callId: string) => Promise<AnnouncedTool["class"]>;
  settle: (device: DeviceIdentity, result: ResultBody) => Promise<void>;
  refuseResult: (device: DeviceIdentity, callId: string, refusal: { code: string; message: string }) => Promise<void>;
  /** Closes the device's stream, wherever it is held, telling the device why. */
  disconnect: (deviceId: string, message: string) => Promise<void>;
  ownerChanged: (userId: string) => Promise<void>;
}

export interface DeviceStreamsOptions {
  db: Kysely<Database>;
  dispatcher: Dispatcher;
  cache: DeviceCache | undefined;
  notify: Watchers["notify"];
  /** Work off the request path (last-seen): its failure goes to `onBackgroundError`. */
  background: (promise: Promise<unknown>) => void;
  onBackgroundError: ((error: unknown) => void) | undefined;
}

export function createDeviceStreams({ db, dispatcher, cache, notify, background, onBackgroundError }: DeviceStreamsOptions): DeviceStreams {
  /** Owners of the streams this replica holds: to close them when their owner is deactivated. */
  const owners = new Map<string, string>();

  // Presence changes arrive on every replica, whichever holds the stream: live pages follow them.
  dispatcher.onPresence(({ deviceId, userId, online }) => {
    if (!online && owners.get(deviceId) === userId && !dispatcher.isOnline(deviceId)) owners.delete(deviceId);
    notify(userId, "devices", deviceId);
  });

  const disconnect = async (deviceId: string, message: string) => {
    await dispatcher.disconnect(deviceId, "revoked", message);
    owners.delete(deviceId);
  };

  return {
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
      await dispatcher.settle(device.id, { id: callId, ok: false, error }).catch((failure: unknown) => onBackgroundError?.(failure));
    },

    disconnect,

    async ownerChanged(userId) {
      cache?.dropUser(userId);
      const live = [...owners].filter(([, owner]) => owner === userId).map(([deviceId]) => deviceId);
      if (live.length === 0) return;
      const user = await db.selectFrom("user").select("deactivatedAt").where("id", "=", userId).executeTakeFirst();
      if (user && !user.deactivatedAt) return;
      for (const deviceId of live) await disconnect(deviceId, "The owner's account was deactivated or deleted; pair the device again");
    },
  };
}
