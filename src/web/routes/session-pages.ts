import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { redirectTo } from "../../http/error-handler.js";
import { notFound } from "../../http/errors.js";
import { listUserSessions, sessionTokenOf } from "../../plugins/activity/user-sessions.js";
import { notifyUserChanged } from "../../plugins/auth/user-admin.js";
import { optionalText, readAuthFailure } from "../forms.js";
import { signedInUser } from "../guard.js";
import { wantsFragment } from "../render.js";

const SESSIONS_PATH = "/settings/sessions";
const SessionParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });
const SessionsQuery = Type.Object({ notice: optionalText(20) });
const NOTICES = new Map([
  ["revoked", "That session is signed out."],
  ["others", "Every other session is signed out, and MCP clients you allowed must connect again."],
]);
const GONE = "That session does not exist any more. It may have been signed out already.";

/**
 * `/settings/sessions`: where the user is signed in (browser and system from the user agent, address,
 * when created and last active) and sign-out of one session or all the others. better-auth deletes
 * the rows; the database trigger on `session` tells every replica's session cache, and this process
 * forgets the user's cached sessions at once, so a revoked session fails its very next request.
 * Signing out the others also revokes every OAuth token of the user (src/plugins/mcp/oauth-revocation.ts).
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const db = fastify.tetherDb;

  const currentSessionId = async (request: FastifyRequest) => (await request.getSession())?.session?.id ?? null;

  const showSessions = async (request: FastifyRequest, reply: FastifyReply, notice?: string, error?: string) => {
    const user = signedInUser(request);
    const sessions = await listUserSessions(db, user.id, await currentSessionId(request));
    return reply.tetherRender(wantsFragment(request) ? "settings/sessions-panel" : "settings/sessions", { title: "Sessions", sessions, notice, error });
  };

  const revoked = (request: FastifyRequest) => notifyUserChanged(fastify.tetherAuth, signedInUser(request).id);

  fastify.get(SESSIONS_PATH, { schema: { querystring: SessionsQuery } }, async (request, reply) =>
    showSessions(request, reply, NOTICES.get(request.query.notice ?? "")),
  );

  fastify.post(`${SESSIONS_PATH}/:id/revoke`, { schema: { params: SessionParams } }, async (request, reply) => {
    const user = signedInUser(request);
    const token = await sessionTokenOf(db, user.id, request.params.id);
    if (!token) throw notFound(GONE);
    const signingOutSelf = request.params.id === (await currentSessionId(request));
    const response = await fastify.tetherCallAuth(request, reply, { method: "POST", path: "/revoke-session", body: { token } });
    if (!response.ok)
      return showSessions(request, reply.code(response.status), undefined, (await readAuthFailure(response, "The session could not be signed out")).message);
    revoked(request);
    return redirectTo(request, reply, signingOutSelf ? "/login" : `${SESSIONS_PATH}?notice=revoked`);
  });

  fastify.post(`${SESSIONS_PATH}/revoke-others`, async (request, reply) => {
    const response = await fastify.tetherCallAuth(request, reply, { method: "POST", path: "/revoke-other-sessions", body: {} });
    if (!response.ok)
      return showSessions(request, reply.code(response.status), undefined, (await readAuthFailure(response, "The sessions could not be signed out")).message);
    revoked(request);
    return redirectTo(request, reply, `${SESSIONS_PATH}?notice=others`);
  });
};

export const sessionPages = fp(routes, {
  name: "tether-session-pages",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-auth", "tether-db", "tether-session", "tether-page-render", "@fastify/formbody"],
});
