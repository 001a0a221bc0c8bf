import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { APIError } from "better-auth/api";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import type { Redis } from "ioredis";
import { HttpError } from "../../http/errors.js";
import { toWebHeaders } from "../../http/web-headers.js";
import { deviceAuthorizationApi, type DeviceRequestDetails } from "../../plugins/host/device-grant.js";
import { createRedisCounterStore } from "../../db/counter-store.js";
import { createRateLimiter, type RateLimiter } from "../../plugins/host/rate-limit.js";
import { optionalText } from "../forms.js";
import { signedInUser } from "../guard.js";
import { wantsFragment } from "../render.js";
import { checkRequest, type RequestCheck } from "../request-check.js";

/**
 * `/device`: where the owner confirms a `tether-host` asking to connect (RFC 8628's verification
 * URI). Opening `verification_uri_complete` fills the code in; otherwise it is typed. The page asks
 * better-auth (`GET /api/auth/device`, which also claims the code for this account), shows what is
 * asking (name, platform, version, address, time), then approves or denies through better-auth's
 * own endpoints. Inside the guarded context; every step works without JavaScript.
 *
 * Everything the device sent is shown as the device's claim: its name quoted and labelled as the name it gave
 * itself, with a warning when that name pretends to be the owner's own machine. What the server knows is shown
 * beside it: how long ago the request was made, and whether it came from the owner's network (request-check.ts),
 * with a prominent warning when it did not, or is old.
 */

const UserCodeQuery = Type.Object({ user_code: optionalText(40) });
const UserCodeForm = Type.Object({ user_code: optionalText(40) });

/** Wrong or unknown codes per account per window: guessing a live code is not an option. */
export const CODE_ENTRY_LIMIT = { max: 10, windowMs: 10 * 60_000 };

type Outcome = "approved" | "denied";

interface PanelState {
  userCode?: string;
  request?: DeviceRequestDetails;
  check?: RequestCheck;
  outcome?: Outcome;
  error?: string;
}

/** What each better-auth refusal means to the person at the page. */
function explain(error: APIError): string {
  const body = error.body as { error?: string; error_description?: string } | undefined;
  if (body?.error === "expired_token") return "That code has expired. Start tether-host again for a new one.";
  if (/already processed/i.test(body?.error_description ?? "")) return "That code was already used. Start tether-host again for a new one.";
  return "That code is not valid. Check it against what tether-host shows, or start it again for a new one.";
}

/** `abcd efgh`, `ABCD-EFGH`: the same code. Shown as `ABCD-EFGH`. */
function normalizeUserCode(raw: string): string {
  const bare = raw.replace(/[^A-Za-z0-9]/g, "").toUpperCase();
  return bare.length === 8 ? `${bare.slice(0, 4)}-${bare.slice(4)}` : bare;
}

export interface DeviceApprovalPageOptions {
  /** Counts wrong codes; overrides `redis`. */
  limiter?: RateLimiter;
  /**
   * Count wrong codes in this Redis, shared by every replica (the app passes the one it counts
   * sign-ins in). Without it, and without `limiter`, each process counts alone: behind several
   * replicas an account could try the limit on each of them.
   */
  redis?: Redis;
}

/** Where the shared counters live in Redis (one key per account, expiring with its window). */
const REDIS_PREFIX = "tether:device-code:";

export function deviceApprovalPage(options: DeviceApprovalPageOptions = {}): FastifyPluginAsync {
  return fp(deviceApproval(options), {
    name: "tether-device-approval-page",
    fastify: "5.x",
    encapsulate: true,
    dependencies: ["tether-auth", "tether-page-render", "@fastify/formbody"],
  });
}

function deviceApproval(options: DeviceApprovalPageOptions): FastifyPluginAsync {
  return async (instance) => {
    const fastify = instance.withTypeProvider<TypeBoxTypeProvider>();
    const auth = deviceAuthorizationApi(fastify.tetherAuth);
    const limiter =
      options.limiter ?? createRateLimiter(CODE_ENTRY_LIMIT, options.redis ? createRedisCounterStore(options.redis, { prefix: REDIS_PREFIX }) : undefined);

    const show = (request: FastifyRequest, reply: FastifyReply, state: PanelState, status = 200) =>
      reply.code(status).tetherRender(wantsFragment(request) ? "device/panel" : "device/page", { title: "Connect a device", ...state });

    /** The pending request behind a code, claimed for this account; a refusal explains itself. */
    const lookUp = async (request: FastifyRequest, userCode: string): Promise<{ details: DeviceRequestDetails } | { error: string; status: number }> => {
      const key = `device-code:${signedInUser(request).id}`;
      // A limit that cannot be checked is never skipped: the page says to try again shortly (503).
      const retryIn = await limiter.hit(key).catch((error: unknown) => {
        throw new HttpError(503, "RATE_LIMIT_UNAVAILABLE", "Entering codes is unavailable for a moment (the rate limit cannot be checked); try again shortly", {
          cause: error,
        });
      });
      if (retryIn > 0) return { error: `Too many codes tried. Wait ${Math.ceil(retryIn / 60)} minute(s), then try again.`, status: 429 };
      try {
        const found = await auth.deviceVerify({ query: { user_code: userCode }, headers: toWebHeaders(request.headers) });
        // Without the details, the code is being confirmed by another account: as good as unknown here.
        if (found.status !== "pending" || found.device_name === undefined) {
          return {
            error: found.status === "pending" ? explain(new APIError("BAD_REQUEST")) : "That code was already used. Start tether-host again for a new one.",
            status: 400,
          };
        }
        // A refund that fails only leaves one extra count in the window.
        await limiter.refund(key).catch((error: unknown) => request.log.warn({ err: error }, "device code limit refund failed"));
        return { details: found as DeviceRequestDetails };
      } catch (error) {
        if (error instanceof APIError) return { error: explain(error), status: 400 };
        throw error;
      }
    };

    fastify.get("/device", { schema: { querystring: UserCodeQuery } }, async (request, reply) => {
      const raw = request.query.user_code?.trim();
      if (!raw) return show(request, reply, {});
      const userCode = normalizeUserCode(raw);
      const found = await lookUp(request, userCode);
      if ("error" in found) return show(request, reply, { userCode, error: found.error }, found.status);
      return show(request, reply, { userCode, request: found.details, check: checkRequest(found.details, request.ip) });
    });

    const decide = (outcome: Outcome) =>
      fastify.post("/device/" + (outcome === "approved" ? "approve" : "deny"), { schema: { body: UserCodeForm } }, async (request, reply) => {
        const userCode = normalizeUserCode(request.body.user_code ?? "");
        if (userCode === "") return show(request, reply, { error: "Enter the code tether-host shows." }, 400);
        const found = await lookUp(request, userCode);
        if ("error" in found) return show(request, reply, { userCode, error: found.error }, found.status);
        const headers = toWebHeaders(request.headers);
        try {
          if (outcome === "approved") await auth.deviceApprove({ body: { userCode }, headers });
          else await auth.deviceDeny({ body: { userCode }, headers });
        } catch (error) {
          if (error instanceof APIError) return show(request, reply, { userCode, error: explain(error) }, 400);
          throw error;
        }
        return show(request, reply, { userCode, request: found.details, outcome });
      });
    decide("approved");
    decide("denied");
  };
}
