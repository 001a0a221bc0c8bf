import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { redirectTo } from "../../http/error-handler.js";
import { HttpError, notFound } from "../../http/errors.js";
import { RECOVERY_SECONDS, recoveryReader } from "../../plugins/auth/account-recovery.js";
import { hasMcpOAuth } from "../../plugins/mcp/oauth.js";
import { optionalText } from "../forms.js";
import { wantsFragment } from "../render.js";

export const RESET_DONE_PATH = "/reset-password/done";
const ItemParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });
const DoneQuery = Type.Object({ notice: optionalText(20) });
/** Status texts after a redirect: fixed words, never reflected input. */
const NOTICES = new Map([
  ["token", "API token revoked. Anything using it stops working at once."],
  ["device", "Device revoked. Its credential no longer works."],
  ["passkey", "Passkey removed. It no longer signs you in."],
]);
const GONE = "That is not one of your credentials any more. It may have been revoked already.";

/**
 * `/reset-password/done`: where a password reset from the page lands. It says what the reset ended
 * (sessions, OAuth grants) and, while the reset's recovery cookie lasts (account-recovery.ts), lists
 * what survived (API tokens, devices, passkeys) with a button that revokes each: plain forms that work
 * without JavaScript (htmx swaps the panel), behind the app's origin guard like every other form.
 * Without the cookie (expired, or two-factor on) it asks the owner to sign in and check the settings.
 */
export const recoveryPage: FastifyPluginAsyncTypebox = async (fastify) => {
  const auth = fastify.tetherAuth;
  const recovery = await recoveryReader(auth);
  const oauth = hasMcpOAuth(auth);
  // Optional parts of the app: devices with the host plugin, passkeys when they are on.
  const host = fastify.hasDecorator("tetherHost") ? fastify.tetherHost : null;
  const passkeysEnabled = fastify.tetherPasskeysEnabled();
  const db = fastify.tetherDb;

  const survivors = async (userId: string) => ({
    tokens: await fastify.tetherApiTokens.list(userId),
    devices: host ? await host.listDevices(userId) : [],
    passkeys: passkeysEnabled
      ? await db.selectFrom("passkey").select(["id", "name", "createdAt"]).where("userId", "=", userId).orderBy("createdAt", "desc").execute()
      : [],
  });

  const show = async (request: FastifyRequest, reply: FastifyReply, extras: { notice?: string; focusNotice?: boolean } = {}) => {
    const userId = await recovery.userOf(request.cookies);
    const listed = userId ? await survivors(userId) : { tokens: [], devices: [], passkeys: [] };
    const data = { title: "Password changed", recovering: userId !== null, oauth, ...listed, ...extras };
    return reply.header("cache-control", "no-store").tetherRender(wantsFragment(request) ? "auth/reset-done-panel" : "auth/reset-done", data);
  };

  /** The user whose reset this browser just made, or a 403 once its time is up. */
  const recoveringUser = async (request: FastifyRequest): Promise<string> => {
    const userId = await recovery.userOf(request.cookies);
    if (!userId) {
      throw new HttpError(
        403,
        "RECOVERY_EXPIRED",
        `This page revokes credentials for ${RECOVERY_SECONDS / 60} minutes after a password reset. Sign in with your new password and revoke them from the settings pages.`,
      );
    }
    return userId;
  };

  const revoked = (request: FastifyRequest, reply: FastifyReply, kind: string) =>
    wantsFragment(request)
      ? show(request, reply, { notice: NOTICES.get(kind), focusNotice: true })
      : redirectTo(request, reply, `${RESET_DONE_PATH}?notice=${kind}`);

  fastify.get(RESET_DONE_PATH, { schema: { querystring: DoneQuery } }, async (request, reply) =>
    show(request, reply, { notice: NOTICES.get(request.query.notice ?? "") }),
  );

  fastify.post(`${RESET_DONE_PATH}/tokens/:id/revoke`, { schema: { params: ItemParams } }, async (request, reply) => {
    const userId = await recoveringUser(request);
    if (!(await fastify.tetherApiTokens.revoke(userId, request.params.id))) throw notFound(GONE);
    return revoked(request, reply, "token");
  });

  if (host) {
    fastify.post(`${RESET_DONE_PATH}/devices/:id/revoke`, { schema: { params: ItemParams } }, async (request, reply) => {
      const userId = await recoveringUser(request);
      if (!(await host.listDevices(userId)).some((device) => device.id === request.params.id)) throw notFound(GONE);
      await host.revoke(userId, request.params.id);
      return revoked(request, reply, "device");
    });
  }

  if (passkeysEnabled) {
    fastify.post(`${RESET_DONE_PATH}/passkeys/:id/remove`, { schema: { params: ItemParams } }, async (request, reply) => {
      const userId = await recoveringUser(request);
      // No session to call better-auth's delete-passkey with: its adapter removes the row, as that endpoint does.
      const adapter = (await auth.$context).adapter;
      const where = [
        { field: "id", value: request.params.id },
        { field: "userId", value: userId },
      ];
      const passkey = await adapter.findOne<{ name: string | null }>({ model: "passkey", where });
      if (!passkey) throw notFound(GONE);
      await adapter.delete({ model: "passkey", where });
      if (fastify.hasDecorator("tetherActivity")) {
        fastify.tetherActivity.record({
          userId,
          event: "passkey.remove",
          actor: "visitor",
          outcome: "ok",
          ipAddress: request.ip,
          detail: passkey.name ? { name: passkey.name } : null,
        });
      }
      return revoked(request, reply, "passkey");
    });
  }
};
