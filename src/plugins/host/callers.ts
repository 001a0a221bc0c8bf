import type { FastifyRequest } from "fastify";
import { unauthorized } from "../../http/errors.js";
import { requireCookieSession } from "../session/session-plugin.js";
import type { Caller } from "./service.js";

/** The scope an API token needs to list devices and call tools. */
export const HOST_CALL_SCOPE = "host:call";

/**
 * Who may list devices, call tools and see proposals: the owner's browser session, or an API token
 * carrying `host:call`. The one check, for the JSON API and the /devices page alike.
 */
export async function hostCaller(request: FastifyRequest): Promise<Caller> {
  const session = await request.getSession({ requiredScope: HOST_CALL_SCOPE });
  if (!session) throw unauthorized(`Sign in, or send an API token with the "${HOST_CALL_SCOPE}" scope`);
  if (session.session) return { userId: session.user.id, actor: "session" };
  // Name the token in the audit log, as /mcp does, so the owner's activity says which token made each call.
  const token = await request.getApiToken();
  return { userId: session.user.id, actor: "token", ...(token ? { credential: `token:${token.id}` } : {}) };
}

/**
 * Pairing, revoking and deciding on proposals are a person's acts: they need the owner's browser
 * session. An agent holding a token can propose a change, never approve its own proposal.
 */
export async function hostPerson(request: FastifyRequest): Promise<Caller> {
  const session = await request.getSession();
  if (!session) throw unauthorized();
  requireCookieSession(session, "This needs the owner's signed-in browser session, not an API token");
  return { userId: session.user.id, actor: "session" };
}
