import { UPDATED_EXIT_CODE } from "../protocol/index.js";

/** How `runHost` ended; the CLI exits with it. */
export const ExitCode = {
  /** Stopped on request (SIGINT, SIGTERM, or the caller's signal). */
  stopped: 0,
  /** Could not start: bad roots, or a server speaking another protocol version. */
  failed: 1,
  /** A setting (config file or environment) cannot be used; the message names it. */
  config: 2,
  /** Not paired, or the credential was revoked: pair again with a new code. */
  pairAgain: 3,
  /** Another process connected with this device's credential and took over. */
  replaced: 4,
  /** It replaced its own executable: the service manager starts the new one. */
  updated: UPDATED_EXIT_CODE,
} as const;
