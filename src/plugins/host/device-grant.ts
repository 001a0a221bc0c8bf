import { extendOAuthProvider, type OAuthProviderExtension, type OAuthTokenResponse } from "@better-auth/oauth-provider";
import type { BetterAuthPlugin, GenericEndpointContext } from "better-auth";
import { APIError, createAuthEndpoint } from "better-auth/api";
import { deviceAuthorization, redeemDeviceCode, type DeviceAuthorizationGrant, type TimeString } from "better-auth/plugins";
import type { Kysely } from "kysely";
import * as z from "zod";
import type { Database } from "../../db/schema.js";
import { DEVICE_CLIENT_ID, DEVICE_CODE_GRANT_TYPE } from "../../protocol/device-authorization.js";
import { CLIENT_IP_HEADER } from "../auth/internal-headers.js";
import { createDevice } from "./devices.js";

/**
 * Device enrollment by RFC 8628 on better-auth's `deviceAuthorization` plugin (`/api/auth/device/*`).
 *
 * - `POST /api/auth/device/code`: `tether-host` asks for a code, naming itself (`device_name`,
 *   `device_platform`, `device_version`, each optional for other RFC 8628 clients: see
 *   `DEVICE_DEFAULTS`); the grant stores that and the requesting address with the code, so the
 *   approval page can show the owner what is asking to connect.
 * - `GET /device` (src/web/routes/device-approval-page.ts): the signed-in owner enters or confirms the user
 *   code, then approves or denies through better-auth's own `/device/approve` and `/device/deny`.
 * - `POST /api/auth/device/credential`: the device polls here (same body and errors as RFC 8628's
 *   token request: `authorization_pending`, `slow_down`, `expired_token`, `access_denied`). Once
 *   approved it gets what a pairing code gives: a new device and its `dt_` credential (stored hashed,
 *   revocable on /devices). No browser-grade session is ever issued to a device: the plugin's own
 *   `/device/token` refuses Tether's codes.
 * - With the OAuth provider installed (MCP OAuth), its token endpoint (`/api/auth/oauth2/token`)
 *   redeems the same codes the same way, and its metadata names `device_authorization_endpoint`, so
 *   a generic RFC 8628 client that discovers the server works unchanged.
 *
 * Both endpoints take JSON or a form (`application/x-www-form-urlencoded`, RFC 8628 §3.1 and §3.4).
 *
 * Only the `tether-host` client id is accepted. User codes are better-auth's: 8 characters from an
 * alphabet without 0/O/1/I, read case-insensitively with any separators, single use.
 */
export { DEVICE_CLIENT_ID, DEVICE_CODE_GRANT_TYPE };

export interface HostDeviceAuthorizationOptions {
  db: Kysely<Database>;
  /** Where the owner approves (absolute): `<base URL>/device`. */
  verificationUri: string;
  /** How long a code lives (better-auth time string, default `10m`). */
  expiresIn?: string;
  /** The polling interval the device is told (default `5s`). */
  interval?: string;
}

/** What a device that does not say what it is gets recorded as (RFC 8628 clients other than tether-host). */
export const DEVICE_DEFAULTS = { name: "Unnamed device", platform: "unknown", version: "unknown" } as const;

/** What the device tells about itself when it asks for a code (each optional; `DEVICE_DEFAULTS` fill in). */
const requestSchemaFields = {
  device_name: z.string().trim().min(1).max(100).optional(),
  device_platform: z.string().trim().min(1).max(100).optional(),
  device_version: z.string().trim().min(1).max(40).optional(),
};

/** Columns the grant adds to better-auth's `deviceCode` table (migrations/0050_device_authorization.ts). */
const deviceCodeSchemaFields = {
  deviceName: { type: "string", required: false },
  devicePlatform: { type: "string", required: false },
  deviceVersion: { type: "string", required: false },
  requestIp: { type: "string", required: false },
  requestedAt: { type: "date", required: false },
} as const;

/** A stored code with the grant's fields, as the adapter returns it. */
interface TetherDeviceCode {
  clientId?: string | null;
  deviceName?: string | null;
  devicePlatform?: string | null;
  deviceVersion?: string | null;
  requestIp?: string | null;
  requestedAt?: Date | string | null;
}

/** What the owner sees before approving (`GET /api/auth/device` adds it for the code's claimer only). */
export type DeviceRequestDetails = {
  device_name: string;
  device_platform: string;
  device_version: string;
  request_ip: string | null;
  requested_at: string | null;
};

const oauthError = (status: "BAD_REQUEST" | "UNAUTHORIZED", error: string, description: string) =>
  new APIError(status, { error, error_description: description });

/**
 * The grant's tether-host fields: what the device says about itself when asking for a code, shown to the
 * owner before approving. Typed with the default parameters: the library's generic constraint cannot be met by
 * a grant with required request fields (its parameter types are checked the wrong way round); zod validated them.
 */
const grant: DeviceAuthorizationGrant = {
  requestSchemaFields,
  deviceCodeSchemaFields: { ...deviceCodeSchemaFields },
  authorizeRequest: ({ ctx, request: raw }) => {
    const request = raw as typeof raw & z.infer<z.ZodObject<typeof requestSchemaFields>>;
    // Another client id falls through to validateClient, which refuses it (invalid_client).
    if (request.client_id !== DEVICE_CLIENT_ID) return undefined;
    return {
      clientId: DEVICE_CLIENT_ID,
      deviceCodeFields: {
        deviceName: request.device_name ?? DEVICE_DEFAULTS.name,
        devicePlatform: request.device_platform ?? DEVICE_DEFAULTS.platform,
        deviceVersion: request.device_version ?? DEVICE_DEFAULTS.version,
        requestIp: ctx.request?.headers.get(CLIENT_IP_HEADER) ?? null,
        requestedAt: new Date(),
      },
    };
  },
  assertSessionRedemption: () => {
    throw oauthError("BAD_REQUEST", "invalid_grant", "tether-host redeems its device code at /api/auth/device/credential");
  },
  getVerificationContext: (record): DeviceRequestDetails => {
    const code = record as TetherDeviceCode;
    return {
      device_name: code.deviceName ?? DEVICE_DEFAULTS.name,
      device_platform: code.devicePlatform ?? DEVICE_DEFAULTS.platform,
      device_version: code.deviceVersion ?? DEVICE_DEFAULTS.version,
      request_ip: code.requestIp ?? null,
      requested_at: code.requestedAt ? new Date(code.requestedAt).toISOString() : null,
    };
  },
};

export function hostDeviceAuthorization(options: HostDeviceAuthorizationOptions): BetterAuthPlugin[] {
  const authorization = deviceAuthorization<typeof grant>({
    // Checked by config (env.ts) to be a number and a unit better-auth's `ms()` reads.
    expiresIn: (options.expiresIn ?? "10m") as TimeString,
    interval: (options.interval ?? "5s") as TimeString,
    userCodeLength: 8,
    verificationUri: options.verificationUri,
    validateClient: (clientId) => clientId === DEVICE_CLIENT_ID,
    grant,
  });
  return [authorization, credentialPlugin(options.db)];
}

/**
 * Redeems an approved code for `tether-host`: better-auth's own redemption (slow_down, expiry,
 * pending, denied, then a one-time claim), then what a pairing code gives: a new device and its
 * `dt_` credential. The same for both token endpoints.
 */
async function redeem(db: HostDeviceAuthorizationOptions["db"], ctx: GenericEndpointContext, body: { client_id?: unknown; device_code?: unknown }) {
  if (body.client_id !== DEVICE_CLIENT_ID) throw oauthError("BAD_REQUEST", "invalid_client", "Invalid client ID");
  if (typeof body.device_code !== "string" || body.device_code === "" || body.device_code.length > 200) {
    throw oauthError("BAD_REQUEST", "invalid_request", "device_code is required");
  }
  const { claimedDeviceCode, user } = await redeemDeviceCode({
    ctx,
    deviceCode: body.device_code,
    authorizeRedemption: async (record) => {
      if ((record as TetherDeviceCode).clientId !== DEVICE_CLIENT_ID) throw oauthError("BAD_REQUEST", "invalid_grant", "Client ID mismatch");
      return { ownershipWhere: { field: "clientId", value: DEVICE_CLIENT_ID }, context: undefined };
    },
    prepareRedemption: () => undefined,
  });
  if ((user as { deactivatedAt?: Date | null }).deactivatedAt) throw oauthError("BAD_REQUEST", "access_denied", "The approving account is deactivated");
  const code = claimedDeviceCode as TetherDeviceCode;
  const device = await createDevice(db, {
    userId: user.id,
    name: code.deviceName ?? DEVICE_DEFAULTS.name,
    platform: code.devicePlatform ?? DEVICE_DEFAULTS.platform,
  });
  return { access_token: device.token, token_type: "Bearer" as const, device_id: device.deviceId };
}

/** `POST /api/auth/device/credential`, the OAuth provider's device_code grant, and their rate limits. */
function credentialPlugin(db: HostDeviceAuthorizationOptions["db"]): BetterAuthPlugin {
  const deviceCredential = createAuthEndpoint(
    "/device/credential",
    {
      method: "POST",
      body: z.object({
        grant_type: z.literal(DEVICE_CODE_GRANT_TYPE),
        device_code: z.string().min(1).max(200),
        client_id: z.string().max(200),
      }),
      // RFC 8628 §3.4 is a form POST; tether-host sends JSON.
      metadata: { noStore: true, allowedMediaTypes: ["application/json", "application/x-www-form-urlencoded"] },
    },
    async (ctx) => {
      const credential = await redeem(db, ctx, ctx.body);
      ctx.setHeader("Cache-Control", "no-store");
      return ctx.json(credential);
    },
  );

  // The OAuth provider's token endpoint takes the device_code grant for tether-host's codes, and its
  // metadata names where codes are asked for: what an RFC 8628 client discovers and uses.
  const providerExtension: OAuthProviderExtension = {
    grants: {
      [DEVICE_CODE_GRANT_TYPE]: async ({ ctx }) => (await redeem(db, ctx, (ctx.body ?? {}) as Record<string, unknown>)) as unknown as OAuthTokenResponse,
    },
    metadata: ({ ctx }) => ({ device_authorization_endpoint: `${ctx.context.baseURL}/device/code` }),
  };

  const credentialPlugin = {
    id: "tether-device-credential",
    init(ctx) {
      if (ctx.getPlugin("oauth-provider")) extendOAuthProvider(ctx, providerExtension);
    },
    endpoints: { deviceCredential },
    // Counted per client address (and shared through the counter store when one is configured),
    // when better-auth's rate limiting is on: asking for codes is rarer than polling.
    rateLimit: [
      { pathMatcher: (path: string) => path === "/device/code", window: 60, max: 10 },
      { pathMatcher: (path: string) => path === "/device/credential", window: 60, max: 60 },
    ],
  } satisfies BetterAuthPlugin;
  return credentialPlugin;
}

/** The plugin's server-side calls the approval page makes (the app's `Auth` type does not list plugin endpoints). */
export interface DeviceAuthorizationApi {
  deviceVerify(input: { query: { user_code: string }; headers: Headers }): Promise<{ status: string } & Partial<DeviceRequestDetails>>;
  deviceApprove(input: { body: { userCode: string }; headers: Headers }): Promise<{ success: boolean }>;
  deviceDeny(input: { body: { userCode: string }; headers: Headers }): Promise<{ success: boolean }>;
}

export function deviceAuthorizationApi(auth: { api: object }): DeviceAuthorizationApi {
  const api = auth.api as Partial<DeviceAuthorizationApi>;
  if (!api.deviceVerify || !api.deviceApprove || !api.deviceDeny) throw new Error("better-auth was built without hostDeviceAuthorization()");
  return api as DeviceAuthorizationApi;
}
