import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { redirectTo } from "../../http/error-handler.js";
import { badRequest, notFound } from "../../http/errors.js";
import { listUserSessions } from "../../plugins/activity/user-sessions.js";
import { userAdmin, type UserListing } from "../../plugins/auth/user-admin.js";
import { hasMcpOAuth, mcpOAuthApi } from "../../plugins/mcp/oauth.js";
import { SCOPES } from "../../plugins/session/scopes.js";
import { optionalText } from "../forms.js";
import { signedInUser } from "../guard.js";
import { wantsFragment } from "../render.js";

const USERS_PATH = "/admin/users";
const UserParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });
const UsersQuery = Type.Object({ notice: optionalText(20) });

interface UserAction {
  /** Refused on one's own account, with this message. */
  notOnSelf?: { code: string; message: string };
  apply(users: ReturnType<typeof userAdmin>, id: string): Promise<void>;
  /** What happened, for the status message. */
  done(user: UserListing): string;
}

/** The admin's buttons, by URL segment (`POST /admin/users/:id/<action>`). */
const ACTIONS: Record<string, UserAction> = {
  deactivate: {
    notOnSelf: { code: "CANNOT_DEACTIVATE_SELF", message: "You cannot deactivate your own account." },
    apply: (users, id) => users.deactivate(id),
    done: (u) => `${u.name} is deactivated and was signed out everywhere.`,
  },
  reactivate: {
    apply: (users, id) => users.reactivate(id),
    done: (u) => `${u.name} is active again and can sign in.`,
  },
  "grant-admin": {
    apply: (users, id) => users.setSiteAdmin(id, true),
    done: (u) => `${u.name} is now a site admin.`,
  },
  "revoke-admin": {
    notOnSelf: { code: "CANNOT_DEMOTE_SELF", message: "You cannot remove your own site-admin role." },
    apply: (users, id) => users.setSiteAdmin(id, false),
    done: (u) => `${u.name} is no longer a site admin.`,
  },
};

/** Status texts after a redirect (no JavaScript): fixed words, never reflected input. */
const NOTICES = new Map([
  ["deactivate", "User deactivated and signed out everywhere."],
  ["reactivate", "User reactivated."],
  ["grant-admin", "Site-admin role granted."],
  ["revoke-admin", "Site-admin role removed."],
]);

/**
 * `/admin/users`: site admins only. A context of its own inside the guarded one: the guard has
 * already turned anonymous visitors away; this hook answers 403 (a Forbidden page) to everyone else.
 * An API-token caller needs the `admin` scope, as in the JSON admin API.
 */
const routes: FastifyPluginAsyncTypebox = async (fastify) => {
  const users = userAdmin(fastify.tetherAuth, fastify.tetherDb);

  fastify.addHook("onRequest", async (request) => {
    await request.requireSiteAdmin({ requiredScope: SCOPES.admin });
  });

  const showUsers = (request: FastifyRequest, reply: FastifyReply, list: UserListing[], notice?: string, focusNotice = false) =>
    reply.tetherRender(wantsFragment(request) ? "admin/users-panel" : "admin/users", { title: "Users", users: list, notice, focusNotice });

  fastify.get(USERS_PATH, { schema: { querystring: UsersQuery } }, async (request, reply) =>
    showUsers(request, reply, await users.list(), NOTICES.get(request.query.notice ?? "")),
  );

  // One user: their sessions (sign out everywhere) and their latest activity.
  fastify.get(`${USERS_PATH}/:id`, { schema: { params: UserParams, querystring: UsersQuery } }, async (request, reply) => {
    const subject = (await users.list()).find((u) => u.id === request.params.id);
    if (!subject) throw notFound("No such user");
    const [sessions, activity] = await Promise.all([listUserSessions(fastify.tetherDb, subject.id, null), fastify.tetherActivity.list({ userId: subject.id })]);
    const notice = request.query.notice === "signed-out" ? `${subject.name} is signed out everywhere.` : undefined;
    return reply.tetherRender("admin/user", { title: subject.name, subject, sessions, activity, notice });
  });

  fastify.post(`${USERS_PATH}/:id/revoke-sessions`, { schema: { params: UserParams } }, async (request, reply) => {
    const id = request.params.id;
    if (!(await users.exists(id))) throw notFound("No such user");
    // Everywhere includes OAuth clients: their tokens outlive the sessions they were issued in. Revoked
    // first, so the change notification revokeSessions sends finds them revoked.
    if (hasMcpOAuth(fastify.tetherAuth)) await mcpOAuthApi(fastify.tetherAuth).revokeMcpOAuthTokens({ body: { userId: id } });
    await users.revokeSessions(id);
    const admin = signedInUser(request);
    fastify.tetherActivity.record({
      userId: id,
      event: "session.revoke-all",
      actor: "admin",
      outcome: "ok",
      ipAddress: request.ip,
      detail: { by: admin.email },
    });
    // Signing oneself out everywhere ends this session too.
    return redirectTo(request, reply, id === admin.id ? "/login" : `${USERS_PATH}/${id}?notice=signed-out`);
  });

  for (const [name, action] of Object.entries(ACTIONS)) {
    fastify.post(`${USERS_PATH}/:id/${name}`, { schema: { params: UserParams } }, async (request, reply) => {
      const id = request.params.id;
      if (action.notOnSelf && id === signedInUser(request).id) throw badRequest(action.notOnSelf.code, action.notOnSelf.message);
      if (!(await users.exists(id))) throw notFound("No such user");
      await action.apply(users, id);
      if (!wantsFragment(request)) return redirectTo(request, reply, `${USERS_PATH}?notice=${name}`);
      const list = await users.list();
      const updated = list.find((u) => u.id === id);
      return showUsers(request, reply, list, updated ? action.done(updated) : undefined, true);
    });
  }
};

export const adminPages = fp(routes, {
  name: "tether-admin-pages",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["tether-auth", "tether-db", "tether-session", "tether-activity", "tether-page-render"],
});
