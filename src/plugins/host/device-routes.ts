import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyRequest } from "fastify";
import { bearerToken } from "../../http/bearer.js";
import { badRequest } from "../../http/errors.js";
import { jsonResponses, NoContent } from "../../http/response-schemas.js";
import { strictValidatorCompiler } from "../../http/strict-validator.js";
import {
  duplicateToolName,
  EnrollBodySchema,
  EnrollReplySchema,
  HelloBodySchema,
  HelloReplySchema,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  StreamEvent,
  UpdateReportSchema,
  type HelloReply,
  type ReadyEvent,
} from "../../protocol/index.js";
import { resultRoutes } from "./device-result-routes.js";
import { recordUpdateReport } from "./device-updates.js";
import type { DeviceIdentity } from "./devices.js";
import { HostError, rethrowAsHttpError } from "./errors.js";
import type { RateLimiter } from "./rate-limit.js";
import type { HostService } from "./service.js";
import { openSseStream } from "./sse-channel.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The device a device-token request comes from; set by the host device routes' auth hook. */
    tetherDevice: DeviceIdentity | null;
  }
}

export interface DeviceRoutesOptions {
  enrollLimiter: RateLimiter;
  keepAliveMs: number;
  /** The tether-host version on offer, told to each device at hello. */
  offeredHostVersion: () => Promise<string>;
  /** The oldest tether-host the server supports, told to each device at hello (`MIN_HOST_VERSION`). */
  minimumHostVersion?: string;
}

/** Every device-facing request names the protocol version it speaks; the one check for it. */
function checkProtocol(request: FastifyRequest): void {
  const spoken = request.headers[PROTOCOL_HEADER];
  if (spoken === String(PROTOCOL_VERSION)) return;
  const said = typeof spoken === "string" && spoken !== "" ? `version ${spoken}` : "no version (send the Tether-Protocol header)";
  throw new HostError(
    "PROTOCOL_VERSION_UNSUPPORTED",
    `This server speaks host protocol version ${PROTOCOL_VERSION}; the device speaks ${said}. Update tether-host or the server so they match.`,
  );
}

/**
 * The device side of the connector: enrollment (pairing code → token), and with the device token:
 * hello, the event stream and results. Device requests carry no cookie and no Origin, so the origin
 * guard lets them through; the token is their only credential.
 */
export const deviceRoutes: FastifyPluginAsyncTypebox<DeviceRoutesOptions> = async (fastify, options) => {
  // Unknown fields are refused, not dropped (see src/http/strict-validator.ts).
  fastify.setValidatorCompiler(strictValidatorCompiler);
  fastify.setErrorHandler(rethrowAsHttpError);
  await fastify.register(enrollRoute, options);

  // The routes below authenticate with the device token.
  await fastify.register(async (instance) => {
    const authenticated = instance.withTypeProvider<TypeBoxTypeProvider>();
    authenticated.decorateRequest("tetherDevice", null);
    authenticated.addHook("onRequest", async (request) => {
      checkProtocol(request);
      request.tetherDevice = await deviceOf(authenticated.tetherHost, request.headers.authorization);
    });
    await authenticated.register(helloRoutes, options);
    await authenticated.register(streamRoute, options);
    await authenticated.register(resultRoutes);
  });
};

/** Pairing: a pairing code for a device token, rate limited per address. */
const enrollRoute: FastifyPluginAsyncTypebox<DeviceRoutesOptions> = async (fastify, options) => {
  fastify.post(
    "/api/host/enroll",
    {
      schema: { body: EnrollBodySchema, response: jsonResponses({ 201: EnrollReplySchema }) },
      // Counted before the body is even parsed, so malformed attempts count too; refunded on success.
      onRequest: async (request, reply) => {
        checkProtocol(request);
        const retryAfter = await options.enrollLimiter.hit(request.ip).catch(() => {
          throw new HostError("RATE_LIMIT_UNAVAILABLE", "Enrollment is unavailable for a moment (the shared rate limit cannot be checked); try again shortly");
        });
        if (retryAfter > 0) {
          reply.header("retry-after", String(retryAfter));
          throw new HostError("RATE_LIMITED", `Too many enrollment attempts from this address; try again in ${retryAfter} s`);
        }
      },
    },
    async (request, reply) => {
      const { code, name, platform } = request.body;
      const enrolled = await fastify.tetherHost.enroll({ code, name: name.trim() || "device", platform: platform.trim() || "unknown" });
      // Only failed attempts count against the address: a person pairing several machines is fine.
      // A refund that fails only leaves one extra count in the window.
      await options.enrollLimiter.refund(request.ip).catch((error: unknown) => request.log.warn({ err: error }, "enroll rate limit refund failed"));
      return reply.code(201).send(enrolled);
    },
  );
};

/** The device a `Bearer dt_…` header names; DEVICE_TOKEN_INVALID or DEVICE_REVOKED otherwise. */
async function deviceOf(service: HostService, authorization: string | undefined): Promise<DeviceIdentity> {
  const token = bearerToken(authorization);
  if (token === undefined) throw new HostError("DEVICE_TOKEN_INVALID", "Send the device token as Authorization: Bearer dt_…");
  const verdict = await service.verifyDeviceToken(token);
  if (!verdict.ok) {
    throw verdict.reason === "revoked"
      ? new HostError("DEVICE_REVOKED", "This device's credential was revoked; pair the device again")
      : new HostError("DEVICE_TOKEN_INVALID", "This device token is not valid; pair the device again");
  }
  return verdict.device;
}

/** What a device tells the server about itself: its tools at hello, and how an update went. */
const helloRoutes: FastifyPluginAsyncTypebox<DeviceRoutesOptions> = async (fastify, options) => {
  fastify.post("/api/host/hello", { schema: { body: HelloBodySchema, response: jsonResponses({ 200: HelloReplySchema }) } }, async (request) => {
    const device = request.tetherDevice!;
    const twice = duplicateToolName(request.body.tools);
    if (twice !== undefined) throw badRequest("INVALID_INPUT", `body: tool "${twice}" is announced twice`);
    await fastify.tetherHost.hello(device, request.body);
    const reply: HelloReply = {
      protocol: PROTOCOL_VERSION,
      deviceId: device.id,
      name: device.name,
      hostVersion: await options.offeredHostVersion(),
      ...(options.minimumHostVersion ? { minimumHostVersion: options.minimumHostVersion } : {}),
    };
    return reply;
  });

  // How an update went (src/protocol/updates.ts): kept on the device row, shown to its owner on /devices.
  fastify.post("/api/host/update-report", { schema: { body: UpdateReportSchema, response: jsonResponses({ 204: NoContent }) } }, async (request, reply) => {
    const device = request.tetherDevice!;
    await recordUpdateReport(fastify.tetherDb, device.id, request.body);
    request.log.info(
      { device: device.id, update: { ok: request.body.ok, from: request.body.from, to: request.body.to, code: request.body.code } },
      "device update report",
    );
    return reply.code(204).send();
  });
};

/** The device's event stream: calls go down it; it stays open while the device is online. */
const streamRoute: FastifyPluginAsyncTypebox<DeviceRoutesOptions> = async (fastify, options) => {
  const service = fastify.tetherHost;
  fastify.get("/api/host/stream", async (request, reply) => {
    const device = request.tetherDevice!;
    // Counted against the owner's and this device token's stream caps until the stream ends.
    const lease = await fastify.tetherStreams.admit(reply, { kind: "device", userId: device.userId, credential: `device:${device.id}` });
    let opened = false;
    try {
      const connection = await service.attachStream(device, () => {
        opened = true;
        reply.hijack();
        const stream = openSseStream(reply.raw, options.keepAliveMs);
        const ready: ReadyEvent = { protocol: PROTOCOL_VERSION, deviceId: device.id, keepAliveMs: options.keepAliveMs };
        stream.send(StreamEvent.ready, ready);
        void stream.ended.then(lease.release);
        stream.ended.then(() => service.detachStream(connection)).catch((error: unknown) => request.log.warn({ err: error }, "stream detach failed"));
        return stream;
      });
    } catch (error) {
      if (!opened) lease.release();
      throw error;
    }
  });
};
