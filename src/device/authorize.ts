import { HostClient, ServerError, type DeviceCodeGrant } from "./client.js";
import { saveCredential, type DeviceCredential } from "./credentials.js";
import { HOST_VERSION } from "./version.js";

/**
 * Enrollment without a pairing code, the way `gh auth login` or Tailscale do it (RFC 8628): ask the
 * server for a code, show the owner where to approve it, poll at the interval the server gives, and
 * store the device credential the approval yields.
 */
export interface AuthorizeDeviceArgs {
  client: HostClient;
  server: string;
  configDir: string;
  name: string;
  platform: string;
  log: (line: string) => void;
  stop: AbortSignal;
  /** Waits `ms` unless `stop` aborts first; false when stopped. */
  sleep: (ms: number, signal: AbortSignal) => Promise<boolean>;
}

/** How the flow ended without a credential (the CLI's exit codes). */
export type AuthorizeFailure = "stopped" | "refused" | "failed";

/** RFC 8628 §3.5: on `slow_down`, poll 5 seconds less often from then on. */
const SLOW_DOWN_STEP_S = 5;
/** A network failure while polling: try again, a little later, until the code expires. */
const RETRY_AFTER_NETWORK_ERROR_S = 5;

/** `ABCDEFGH` is shown as `ABCD-EFGH`, easier to read out and compare; the server takes either. */
export function displayUserCode(code: string): string {
  return /^[A-Z0-9]{8}$/i.test(code) ? `${code.slice(0, 4)}-${code.slice(4)}` : code;
}

export async function authorizeDevice(args: AuthorizeDeviceArgs): Promise<DeviceCredential | AuthorizeFailure> {
  const { client, server, log, stop } = args;
  let grant: DeviceCodeGrant;
  try {
    grant = await client.requestDeviceCode({ name: args.name, platform: args.platform, version: HOST_VERSION }, stop);
  } catch (error) {
    if (stop.aborted) return "stopped";
    if (!(error instanceof ServerError)) {
      // Nothing answered: a new pairing code would not help. Say which address was tried.
      log(unreachable(server, error));
      return "failed";
    }
    const why = `${error.message} (${error.code})`;
    log(
      `tether-host: not paired with ${server}, and the server gave no device code: ${why}. Mint a pairing code on ${server}/devices and start again with TETHER_PAIRING_CODE=<code>.`,
    );
    return error instanceof ServerError && error.permanent ? "refused" : "failed";
  }

  const code = displayUserCode(grant.user_code);
  log(`tether-host: to connect this device ("${args.name}") to your account, open`);
  log(`  ${grant.verification_uri_complete ?? grant.verification_uri}`);
  log(`and check that the page shows this code:`);
  log(code);
  log(`(it expires in ${Math.round(grant.expires_in / 60)} minutes; waiting for approval…)`);

  let intervalS = Math.max(1, grant.interval ?? 5);
  const expiresAt = Date.now() + grant.expires_in * 1000;
  for (;;) {
    if (!(await args.sleep(intervalS * 1000, stop))) return "stopped";
    try {
      const enrolled = await client.redeemDeviceCode(grant.device_code, stop);
      const credential: DeviceCredential = { deviceId: enrolled.deviceId, token: enrolled.token, name: args.name, pairedAt: new Date().toISOString() };
      await saveCredential(args.configDir, server, credential);
      log(`tether-host: approved; paired with ${server} as "${args.name}" (device ${enrolled.deviceId})`);
      return credential;
    } catch (error) {
      if (stop.aborted) return "stopped";
      if (!(error instanceof ServerError)) {
        if (Date.now() > expiresAt) return expired(args, code);
        log(`tether-host: cannot reach ${server} (${describe(error)}); still waiting for approval`);
        intervalS = Math.max(intervalS, RETRY_AFTER_NETWORK_ERROR_S);
        continue;
      }
      switch (error.code) {
        case "authorization_pending":
          continue;
        case "slow_down":
          intervalS += SLOW_DOWN_STEP_S;
          log(`tether-host: the server asked to poll less often; now every ${intervalS} s`);
          continue;
        case "expired_token":
          return expired(args, code);
        case "access_denied":
          log(`tether-host: the request to connect was denied on ${server}. Start tether-host again to ask again.`);
          return "refused";
        default:
          if (!error.permanent && Date.now() < expiresAt) continue;
          log(`tether-host: enrollment failed: ${error.message} (${error.code}). Start tether-host again for a new code.`);
          return "refused";
      }
    }
  }
}

function expired(args: AuthorizeDeviceArgs, code: string): AuthorizeFailure {
  args.log(`tether-host: the code ${code} expired before it was approved. Start tether-host again for a new one.`);
  return "refused";
}

/** The line for a server that did not answer at all: the address tried, why, and what to check. */
export function unreachable(server: string, error: unknown): string {
  return `tether-host: cannot reach the server at ${server} (${describe(error)}). Check that it is running and that TETHER_SERVER_URL is the address its /devices page shows.`;
}

const describe = (error: unknown) => (error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error));
