import { authorizeDevice } from "./authorize.js";
import { HostClient, ServerError } from "./client.js";
import { hostPlatform } from "./config.js";
import { loadCredential, saveCredential, type DeviceCredential } from "./credentials.js";
import { ExitCode } from "./exit-code.js";
import { backoffDelay, seconds, sleep, type Backoff } from "./sleep.js";

export const describeError = (error: unknown) =>
  error instanceof ServerError
    ? `${error.code}: ${error.message}`
    : error instanceof Error
      ? error.cause instanceof Error
        ? error.cause.message
        : error.message
      : String(error);

/** The stored credential for `server`, else enrollment: a pairing code when given, else device authorization. */
export async function obtainCredential(args: {
  client: HostClient;
  server: string;
  configDir: string;
  name: string;
  pairingCode: string | undefined;
  log: (line: string) => void;
  stop: AbortSignal;
  backoff: Backoff;
}): Promise<DeviceCredential | number> {
  const { client, server, configDir, log } = args;
  const stored = await loadCredential(configDir, server);
  if (stored) {
    if (args.pairingCode) log(`tether-host: already paired with ${server} as device ${stored.deviceId}; ignoring TETHER_PAIRING_CODE`);
    return stored;
  }
  if (!args.pairingCode) {
    // No code given: the device authorization flow (the owner approves on the server's /device page).
    const authorized = await authorizeDevice({ client, server, configDir, name: args.name, platform: hostPlatform(), log, stop: args.stop, sleep });
    if (typeof authorized !== "string") return authorized;
    return authorized === "stopped" ? ExitCode.stopped : authorized === "failed" ? ExitCode.failed : ExitCode.pairAgain;
  }
  for (let attempt = 0; ; attempt++) {
    try {
      const enrolled = await client.enroll(args.pairingCode, args.name, hostPlatform(), args.stop);
      const credential: DeviceCredential = { deviceId: enrolled.deviceId, token: enrolled.token, name: args.name, pairedAt: new Date().toISOString() };
      await saveCredential(configDir, server, credential);
      log(`tether-host: paired with ${server} as "${args.name}" (device ${enrolled.deviceId})`);
      return credential;
    } catch (error) {
      if (args.stop.aborted) return ExitCode.stopped;
      if (error instanceof ServerError && error.permanent) {
        log(`tether-host: pairing failed: ${error.message} (${error.code})`);
        return error.code === "PROTOCOL_VERSION_UNSUPPORTED" ? ExitCode.failed : ExitCode.pairAgain;
      }
      const delay = backoffDelay(attempt, args.backoff);
      log(`tether-host: cannot reach ${server} to pair (${describeError(error)}); retrying in ${seconds(delay)}`);
      if (!(await sleep(delay, args.stop))) return ExitCode.stopped;
    }
  }
}
